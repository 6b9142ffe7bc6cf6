// Summaries of a sample of numbers, as reports print them.
#pragma once

#include <vector>

namespace colo {

// The mean; 0 for no values.
double Mean(const std::vector<double>& values);
// The q-quantile (0..1) by nearest rank: the smallest value with at least q of the values at or
// below it; 0 for no values.
double NearestRank(std::vector<double> values, double q);
// Jain's fairness index, (sum x)^2 / (n sum x^2): 1 when every value is the same, 1/n when one
// value has it all; 1 for no values.
double JainIndex(const std::vector<double>& values);

}  // namespace colo
