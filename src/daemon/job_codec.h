// A job record as text: the one encoding of a stored job (the record column of the state
// database). Encoding never fails; decoding is strict and total, so a corrupted record becomes an
// error naming the field instead of a job with made-up values.
//
// The record is a JSON object with "format": 2. Times are seconds since the epoch (kept to the
// microsecond), sizes are bytes, enums are their ToString names.
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"
#include "daemon/job.h"

namespace colo {

constexpr int kJobRecordFormat = 2;
// A record larger than this is refused on both sides: an environment of a few MiB is the most a
// real job brings, and a bound keeps a corrupted row from costing colod its memory.
constexpr size_t kMaxJobRecordBytes = 16 << 20;

// `job` as record text. Strings are made valid UTF-8 first; numbers that JSON cannot hold (a NaN
// expected SM activity or uncertainty) are written as "unknown" (-1) and 0, so that every encoded
// record decodes.
std::string EncodeJob(const Job& job);

// The job in `text`, or InvalidArgument naming the first bad field ("spec.gpus: not an integer",
// "attempts[1].exit: unknown exit kind 'boom'"). Fields this version does not know are ignored.
Result<Job> DecodeJob(std::string_view text);

// A record written by schema 1 of the state database (before this codec), for the migration:
// its fields are read with that version's defaults, but a field of the wrong type or an unknown
// enum name is still an error naming it.
Result<Job> DecodeSchema1Job(std::string_view text);

// A list of strings (a command, an environment) as text, for a store that keeps it apart from
// the records that hold it: a JSON list, its strings made valid UTF-8 first.
std::string EncodeStrings(const std::vector<std::string>& strings);
// The list in `text`, or InvalidArgument saying what is wrong with it.
Result<std::vector<std::string>> DecodeStrings(std::string_view text);

// The longest event kind kept; kinds are short words ("submitted", "out-of-memory").
constexpr size_t kMaxEventKindBytes = 64;

// An event as a store keeps it and gives it back: kind and detail valid UTF-8 and cut to
// kMaxEventKindBytes and kMaxEventDetailBytes, the time to the microsecond.
JobEvent StoredEvent(const JobEvent& event);

}  // namespace colo
