// Fair share among the users of one server, Slurm's multifactor priority made small enough to
// explain in a sentence: a user's usage is the GPU time their jobs held, each GPU weighted by the
// share of its memory the job planned, decayed with a half-life; a waiting job's priority combines
// its owner's fair-share factor (usage against share) with how long it has waited. colod and
// `colo sim` both order their queues by it through the scheduler.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "common/units.h"

namespace colo {

// How the main queue is ordered.
enum class QueueOrder {
  kFifo,       // arrival order (each user's own jobs by their --priority, in the places they hold)
  kFairShare,  // by priority: the owner's fair-share factor and the job's age
};
Result<QueueOrder> ParseQueueOrder(std::string_view text);
std::string_view ToString(QueueOrder order);

// Which running jobs may be stopped so that a waiting job under its owner's share can start.
enum class Preemptible {
  kRequeue,  // jobs submitted --requeue: they said they can resume
  kAll,      // every job (one that did not ask is started again from its beginning)
};
Result<Preemptible> ParsePreemptible(std::string_view text);
std::string_view ToString(Preemptible preemptible);

struct FairnessConfig {
  QueueOrder order = QueueOrder::kFifo;
  // Usage halves over this long: what a user ran a week ago counts half of what they run now.
  Duration half_life = Seconds(7 * 86400);
  // priority = weight_fair_share x fair-share factor + weight_age x age factor (each 0..1), as
  // Slurm's PriorityWeightFairshare and PriorityWeightAge; the age factor reaches 1 at max_age.
  double weight_fair_share = 10000;
  double weight_age = 1000;
  Duration max_age = Seconds(7 * 86400);
  // Preemption: the queue's head, whose owner is under their share and who has waited this long,
  // may have preemptible jobs of users over their share stopped (signalled, then requeued).
  bool preempt = false;
  Duration preempt_after = Seconds(1800);
  Preemptible preemptible = Preemptible::kRequeue;
  // The longest notice a preempted job gets (Slurm's GraceTime), whatever its --signal's lead
  // asks: the lead is the job's to choose, and a job that ignores its signal keeps its GPUs, and
  // the head waiting for them, until its notice is over.
  Duration max_notice = Seconds(600);
  bool operator==(const FairnessConfig&) const = default;
};

// What a user may hold at once (Slurm's MaxTRESPerUser); 0: no limit.
struct UserLimits {
  int gpus = 0;
  Bytes gpu_memory{0};  // planned GPU memory, summed over the user's jobs and their GPUs
  int running_jobs = 0;
  bool any() const { return gpus > 0 || gpu_memory > Bytes(0) || running_jobs > 0; }
  bool operator==(const UserLimits&) const = default;
};

// What an administrator grants one user: their share of the server (relative to the other users'
// shares: 2 is twice a default user's) and their limits.
struct UserTerms {
  double share = 1;
  UserLimits limits;
  bool operator==(const UserTerms&) const = default;
};

// What one user's running jobs hold now, for their limits.
struct Holdings {
  int gpus = 0;
  Bytes gpu_memory;
  int running_jobs = 0;
};

// Why a job of a user holding `held` may not start now under `limits` (the reason names the
// limit), or nullopt when it may. `gpus` and `gpu_memory` are what the job itself would hold.
std::optional<std::string> OverLimit(const std::string& user, const UserLimits& limits,
                                     const Holdings& held, int gpus, Bytes gpu_memory);
// Whether no job at all could start under the limits (the user holds all they may of something).
bool AtLimit(const UserLimits& limits, const Holdings& held);

// A usage decayed over `elapsed` with the half-life.
double Decay(double usage, Duration elapsed, Duration half_life);

// Every user's decayed usage, in GPU-seconds. A user's jobs hold some GPU-equivalents at each
// moment (a rate); usage grows by the rate and decays continuously, so it is known exactly at any
// time from its value at the last change.
class UsageLedger {
 public:
  // What the ledger keeps of a user.
  struct Account {
    double usage = 0;  // at as_of
    double rate = 0;
    TimePoint as_of;
  };
  // A user's account, for a caller that changes one user's rate often and finds it once.
  using AccountRef = std::map<std::string, Account>::iterator;

  explicit UsageLedger(Duration half_life) : half_life_(half_life) {}

  // The user's jobs hold `delta` more GPU-equivalents (less, negative) from `t` on.
  void AddRate(const std::string& user, double delta, TimePoint t);
  // The user's account, opened (empty) where there is none. It stays valid until AddRate on it
  // says the user is forgotten.
  AccountRef Open(const std::string& user);
  // AddRate on an open account; false: the user holds nothing and their usage has decayed away,
  // and the account is gone.
  bool AddRate(AccountRef account, double delta, TimePoint t);
  double Usage(const std::string& user, TimePoint t) const;
  double Rate(const std::string& user) const;
  // Sets a user's usage at `t` (read back after a restart); their rate is kept.
  void Restore(const std::string& user, double usage, TimePoint t);
  // Every user with usage or jobs running, and their usage at `t`.
  std::map<std::string, double> Snapshot(TimePoint t) const;
  // The sum of every user's usage at `t` (of Snapshot's, added in the same order).
  double Total(TimePoint t) const;
  // Every user with usage or jobs running, in name order.
  const std::map<std::string, Account>& accounts() const { return accounts_; }
  Duration half_life() const { return half_life_; }

 private:
  double At(const Account& account, TimePoint t) const;

  Duration half_life_;
  std::map<std::string, Account> accounts_;
};

// Where one user stands: their share and usage as fractions of everyone's who counts.
struct UserStanding {
  std::string user;
  double share = 1;           // as granted
  double share_fraction = 1;  // of the shares of every user who counts now
  double usage = 0;           // GPU-seconds, decayed
  double usage_fraction = 0;  // of every user's usage
  double rate = 0;            // GPU-equivalents their jobs hold now
  double factor = 1;          // the fair-share factor, 2^-(usage_fraction / share_fraction)
  // Has had less of the server than their share.
  bool under_share() const { return usage_fraction < share_fraction; }
};

double FairShareFactor(double usage_fraction, double share_fraction);

// What standings are fractions of: the shares of every user who counts, everyone's usage.
struct StandingTotals {
  double share = 0;
  double usage = 0;
};
// Where `user`, granted `share`, stands at `t` against those totals.
UserStanding StandingOf(const UsageLedger& ledger, const std::string& user, double share,
                        const StandingTotals& totals, TimePoint t);
// 0 for a job that just began waiting, 1 once it has waited max_age.
double AgeFactor(Duration waited, Duration max_age);
double Priority(const FairnessConfig& config, double fair_share_factor, double age_factor);

// The standings of `users` (each with their share) at `t`: shares are normalised over them, usage
// over every user of the ledger.
std::map<std::string, UserStanding> Standings(const UsageLedger& ledger,
                                              const std::map<std::string, double>& users,
                                              TimePoint t);

// "40%": a fraction for what people read.
std::string Percent(double fraction);

}  // namespace colo
