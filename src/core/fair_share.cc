#include "core/fair_share.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace colo {
namespace {
// Usage (GPU-seconds) below which a user who holds nothing is forgotten: a millisecond of a GPU.
constexpr double kForgottenUsage = 1e-3;
}  // namespace

Result<QueueOrder> ParseQueueOrder(std::string_view text) {
  if (text == "fifo") return QueueOrder::kFifo;
  if (text == "fair-share" || text == "fair") return QueueOrder::kFairShare;
  return InvalidArgument(fmt::format("unknown queue order '{}' (use fair-share or fifo)", text));
}

std::string_view ToString(QueueOrder order) {
  return order == QueueOrder::kFifo ? "fifo" : "fair-share";
}

Result<Preemptible> ParsePreemptible(std::string_view text) {
  if (text == "requeue") return Preemptible::kRequeue;
  if (text == "all") return Preemptible::kAll;
  return InvalidArgument(fmt::format(
      "unknown preemptible '{}' (use requeue: jobs submitted --requeue; or all)", text));
}

std::string_view ToString(Preemptible preemptible) {
  return preemptible == Preemptible::kRequeue ? "requeue" : "all";
}

std::optional<std::string> OverLimit(const std::string& user, const UserLimits& limits,
                                     const Holdings& held, int gpus, Bytes gpu_memory) {
  if (limits.running_jobs > 0 && held.running_jobs + 1 > limits.running_jobs)
    return fmt::format("{} runs {} of the {} jobs one user may run at once", user,
                       held.running_jobs, limits.running_jobs);
  if (limits.gpus > 0 && held.gpus + gpus > limits.gpus)
    return fmt::format("{} holds {} of the {} GPUs one user may hold; this job needs {}", user,
                       held.gpus, limits.gpus, gpus);
  if (limits.gpu_memory > Bytes(0) && held.gpu_memory + gpu_memory > limits.gpu_memory)
    return fmt::format(
        "{} holds {} of the {} of GPU memory one user may plan with; this job "
        "plans {}",
        user, FormatBytes(held.gpu_memory), FormatBytes(limits.gpu_memory),
        FormatBytes(gpu_memory));
  return std::nullopt;
}

bool AtLimit(const UserLimits& limits, const Holdings& held) {
  return (limits.running_jobs > 0 && held.running_jobs >= limits.running_jobs) ||
         (limits.gpus > 0 && held.gpus >= limits.gpus) ||
         (limits.gpu_memory > Bytes(0) && held.gpu_memory >= limits.gpu_memory);
}

double Decay(double usage, Duration elapsed, Duration half_life) {
  if (elapsed <= Duration::zero()) return usage;
  return usage * std::exp2(-ToSeconds(elapsed) / ToSeconds(half_life));
}

double UsageLedger::At(const Account& account, TimePoint t) const {
  const double elapsed = std::max(0.0, ToSeconds(t - account.as_of));
  const double lambda = std::log(2.0) / ToSeconds(half_life_);
  const double kept = std::exp(-lambda * elapsed);
  // A constant rate r since as_of adds r * (1 - e^-lt) / l: the integral of its decayed charge.
  return account.usage * kept + account.rate * (1 - kept) / lambda;
}

void UsageLedger::AddRate(const std::string& user, double delta, TimePoint t) {
  if (delta != 0) AddRate(Open(user), delta, t);
}

UsageLedger::AccountRef UsageLedger::Open(const std::string& user) {
  return accounts_.try_emplace(user).first;
}

bool UsageLedger::AddRate(AccountRef it, double delta, TimePoint t) {
  if (delta == 0) return true;
  Account& account = it->second;
  account.usage = At(account, t);
  account.as_of = t;
  account.rate += delta;
  // Rounding leaves crumbs when the last job of a user ends.
  if (std::abs(account.rate) < 1e-9) account.rate = 0;
  // A user who holds nothing and whose usage has decayed away is forgotten.
  if (account.rate == 0 && account.usage < kForgottenUsage) {
    accounts_.erase(it);
    return false;
  }
  return true;
}

double UsageLedger::Usage(const std::string& user, TimePoint t) const {
  const auto it = accounts_.find(user);
  return it == accounts_.end() ? 0.0 : At(it->second, t);
}

double UsageLedger::Rate(const std::string& user) const {
  const auto it = accounts_.find(user);
  return it == accounts_.end() ? 0.0 : it->second.rate;
}

void UsageLedger::Restore(const std::string& user, double usage, TimePoint t) {
  Account& account = accounts_[user];
  account.usage = std::max(0.0, usage);
  account.as_of = t;
}

std::map<std::string, double> UsageLedger::Snapshot(TimePoint t) const {
  std::map<std::string, double> out;
  for (const auto& [user, account] : accounts_) out[user] = At(account, t);
  return out;
}

double UsageLedger::Total(TimePoint t) const {
  double total = 0;
  for (const auto& [user, account] : accounts_) total += At(account, t);
  return total;
}

double FairShareFactor(double usage_fraction, double share_fraction) {
  if (share_fraction <= 0) return 0;
  return std::exp2(-usage_fraction / share_fraction);
}

double AgeFactor(Duration waited, Duration max_age) {
  if (waited <= Duration::zero()) return 0;
  if (max_age <= Duration::zero()) return 1;
  return std::min(1.0, ToSeconds(waited) / ToSeconds(max_age));
}

double Priority(const FairnessConfig& config, double fair_share_factor, double age_factor) {
  return config.weight_fair_share * fair_share_factor + config.weight_age * age_factor;
}

UserStanding StandingOf(const UsageLedger& ledger, const std::string& user, double share,
                        const StandingTotals& totals, TimePoint t) {
  UserStanding s;
  s.user = user;
  s.share = share;
  s.share_fraction = totals.share > 0 ? share / totals.share : 0;
  s.usage = ledger.Usage(user, t);
  s.usage_fraction = totals.usage > 0 ? s.usage / totals.usage : 0;
  s.rate = ledger.Rate(user);
  s.factor = FairShareFactor(s.usage_fraction, s.share_fraction);
  return s;
}

std::map<std::string, UserStanding> Standings(const UsageLedger& ledger,
                                              const std::map<std::string, double>& users,
                                              TimePoint t) {
  StandingTotals totals;
  totals.usage = ledger.Total(t);
  for (const auto& [user, share] : users) totals.share += share;
  std::map<std::string, UserStanding> out;
  for (const auto& [user, share] : users)
    out.emplace_hint(out.end(), user, StandingOf(ledger, user, share, totals, t));
  return out;
}

std::string Percent(double fraction) {
  const double percent = 100 * fraction;
  if (percent > 0 && percent < 1) return fmt::format("{:.1f}%", percent);
  return fmt::format("{:.0f}%", percent);
}

}  // namespace colo
