// The simulator's cluster layer (ClusterMode::kQueue and kFifo): one cluster-wide queue in
// arrival order, as slurmctld keeps, over the servers' own schedulers. A job goes to a server
// only when that server's scheduler can start it now; the oldest waiting job reserves the most
// free server and queues there.
//
// The cluster keeps a picture of every server: its view as last read (the policy decides on it),
// what it derives from it (usable GPUs and their free memory, to rule a server out without asking
// the policy) and the server's free planned memory, its place in the index. Reading a view costs
// as much as a placement pass, so pictures are read only when needed, and each carries what is
// known of it since: `stale`, it only took more (an upper bound); `changed`, it may take more (no
// bound: read before it is trusted to refuse); `grew`, its free memory may be higher than its
// place in the index (read before the index is trusted). Free memory itself is kept exact between
// reads by accounting every reservation the servers' schedulers make and release.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "core/scheduler.h"
#include "sim/engine_state.h"

namespace colo::sim {

// What the cluster queue asks of the engine that drives it.
class ClusterHost {
 public:
  virtual ~ClusterHost() = default;
  // Look at the server's picture again at `time` (tag 0: a GPU may open; 1: its free memory
  // may grow): the engine calls ClusterQueue::Wake then.
  virtual void WakeAt(int server, TimePoint time, uint64_t tag) = 0;
  // The server's scheduler decided at this instant: it wants to run again at its NextWakeup.
  virtual void PushWakeup(int server) = 0;
  // Carries out a launch a server's scheduler decided (the job takes its GPU list).
  virtual void Start(int server, Launch launch) = 0;
};

class ClusterQueue {
 public:
  ClusterQueue(EngineState& state, ClusterHost& host);

  // Before the first event: every server is eligible and read when first needed.
  void Begin();
  // A job arrives with its spec set: refused at once if no idle server could run it, else queued.
  void Submit(int index);
  // A job taken back from its server (Slurm requeues it): it waits again at its place.
  void Requeue(int index);

  // What happened to a server since it was read.
  void MarkChanged(int server, Change change);
  // The accounting of reservations between reads of a server.
  void AccountLaunch(int server, const Launch& launch);
  Bytes ReservationOf(const SimJob& job) const;
  void AccountGrowth(const SimJob& job, Bytes before);
  void AccountExit(const SimJob& job, Bytes reservation);
  // The job started on its server: its reservation may shrink later without an event.
  void WatchShrink(const SimJob& job);

  // A server's own pass decided these launches (started after the round of this instant).
  bool eligible(int server) const { return pictures_[static_cast<size_t>(server)].eligible; }
  void OnPass(int server, std::vector<Launch> launches, bool was_eligible);

  // Whether a wake-up the engine holds is the one the picture waits for, and its handler.
  bool IsCurrentWakeup(int server, uint64_t tag, TimePoint time) const;
  void Wake(int server, uint64_t tag, TimePoint time);

  // At the end of an instant, after the servers' passes: a scheduling round when something it
  // waits for may have changed, then the instant's launches.
  void EndInstant();

  // How long a GPU's utilization window can keep falling after its last change (set by Begin).
  Duration utilization_horizon() const { return utilization_horizon_; }
  int64_t rounds() const { return round_; }
  int requeues() const { return requeues_; }
  int64_t dispatch_checks() const { return dispatch_checks_; }
  int64_t dispatch_violations() const { return dispatch_violations_; }

 private:
  // Eligible servers by (-score, index): the most free first, ties to the lowest index.
  using ServerIndex = std::set<std::pair<int64_t, int>>;

  // The cluster's picture of one server, as of its last read.
  struct Picture {
    TimePoint read_at;  // when it was last read
    // Its GPUs as last read (a copy of the pass's view, into the buffers of the last one): what
    // a look that reads nothing checks the gates' answers against.
    ClusterView view;
    bool eligible = false;  // its own queues are empty: the cluster may send it a job
    // Since its picture was read it may take more (a GPU's grace ended, a window fell, a job
    // left): the picture is no bound, it is read again before use. With `grew`, its free memory
    // may have grown too: it sits at the top of the index until read.
    bool changed = false;
    bool grew = false;
    bool stale = false;  // it only took more since: the picture is an upper bound
    // Its place in the index while it is there, under its key (-score, index).
    std::optional<ServerIndex::const_iterator> place;
    int64_t score = 0;          // free planned memory (bytes), idle GPUs' memory, or free shards
    int usable = 0;             // GPUs that could take some job now
    std::vector<int64_t> caps;  // caps[k]: the (k+1)-th largest usable GPU's free memory
    // Per GPU, kept exact between reads: free planned memory, jobs, exclusive jobs.
    std::vector<int64_t> free;
    std::vector<int> jobs_on, exclusive_on;
    // When its view changes with time alone: a GPU's grace ends, a window falls (opens), or a
    // reservation shrinks (grows).
    std::optional<TimePoint> open_wakeup, grow_wakeup;
    // Per GPU, as of its last read: the gate that stopped the least demanding job (kPass where
    // none did), and for the launch grace, when it ends.
    std::vector<Gate> gates;
    std::vector<TimePoint> grace_ends;
    // Per GPU: its utilization gate answers the same until a new sample, however its windows
    // slide (held even at their lowest, or let in even at their highest).
    std::vector<uint8_t> answer_lasts;
    // Since its last read, only its open_wakeup came: nothing else changed it.
    bool look_only = false;
    // Its places in changed_ (more than one if it changed again before they were pruned), and
    // whether it is in read_since_prune_.
    std::vector<uint32_t> listed;
    bool read_since_prune = false;
  };

  void Enqueue(int index);
  // The job leaves the queue (it starts).
  void Dequeue(SimJob& job);
  void Index(int server, std::pair<int64_t, int> key);
  void Unindex(int server);
  // Moves an indexed server to the place its accounted free memory gives it.
  void Reindex(int server);
  // The next time the job's reservation shrinks without an event, if it will.
  std::optional<TimePoint> NextShrink(const SimJob& job, TimePoint now) const;
  void WakeToGrow(int server, TimePoint t);
  // Re-reads a server's view and what the cluster keeps of it (eligibility, free memory, usable
  // GPUs), re-indexes it and schedules a look at the time its view changes without an event.
  void ReadServer(int server);
  // Schedules a look at the time the server's view changes without an event (its picture's gates
  // as last read): when a GPU's grace ends or window may fall (open), or, with `shrinks`, when a
  // reservation shrinks (grow).
  void WakeWhenViewChanges(int server, bool shrinks);
  // Whether, at this instant, every gate of the server answers the least demanding job as at its
  // last read (no window has crossed its threshold, no grace has ended): a read now would find
  // the picture as it is.
  bool GatesAnswerAsRead(int server) const;
  // At the end of an instant whose only news is servers' looks at windows that let nothing in:
  // with jobs the last round left waiting and no new ones, a round would read those servers, find
  // them as they were and start nothing. They only schedule their next looks. False when a round
  // is needed.
  bool LooksChangeNothing();
  // The need the job plans with on a server: with learn=on, what its colod learned from runs.
  MemoryNeed NeedOn(const SimJob& job, int server) const;
  PlacementRequest RequestFor(const SimJob& job, int server) const;
  // A necessary condition for the policy to place the request on the server (no policy call).
  bool MayPlace(const Picture& server, const PlacementRequest& request) const;
  // The least score a server that can take the request has.
  int64_t NeededScore(const PlacementRequest& request) const;
  // Hands the job to the server's scheduler, planning with `need` and the run time the server's
  // runs of its model taught: queued there, or with `placed` (the policy's decision on the
  // server's pass view at this instant, whose GPU list the launch takes), started at once.
  std::optional<Launch> SubmitTo(int server_index, SimJob& job, const MemoryNeed& need,
                                 Placed* placed = nullptr);
  // Starts the job on the server if it can start it now.
  bool TryStart(int index, int server, const PlacementRequest& request);
  // Starts the job on the most free server that can start it now, if any. A job looked at in the
  // previous round is tried only on the servers that may take more since; others go down the
  // free-memory index.
  bool StartSomewhere(int index, bool looked_at_last_round);
  bool SearchAndStart(int index, bool looked_at_last_round);
  // The servers that changed since the last round in the order they are tried: the most free
  // first (the least free under best-fit).
  void SortRoundChanged();
  // Whether a request that no server started earlier in this round, no picture having changed
  // since, rules the job's out: one of its kind (RequestKind) that asked for no more GPUs and no
  // more memory (a policy that refuses a request refuses one that asks for more). `looked_at`:
  // the job is tried only on the servers that changed since the last round.
  bool KnownRefused(const SimJob& job, bool looked_at);
  void NoteRefused(const SimJob& job, bool looked_at);
  struct Refused;
  // The refusals of the job's kind (its number kept from the first time it is asked).
  Refused& RefusedOfKind(const SimJob& job);
  // The number of the request's kind, numbering it if new.
  int KindOf(const PlacementRequest& request);
  // From `from` on, the jobs the last round left waiting that a refusal of this round rules out
  // (KnownRefused, as StartSomewhere would find them) are left waiting as a look at each would
  // leave them, counted in `waiting` and `old_seen`, without the rest of a look: the round meets
  // them in runs (those before the first job a server that changed can take, or after each
  // start). Stops at the first other job, or where the queue's depth is reached; returns it.
  std::set<int>::const_iterator PassKnownRefused(std::set<int>::const_iterator from, int& waiting,
                                                 int& old_seen);
  // The round leaves the job waiting.
  void LeftWaiting(const SimJob& job);
  // Whether a server that changed since the last round may start one of the jobs it left waiting,
  // as far as its picture tells (what a look at each would ask before the policy): those least
  // demanding of them (left_least_) are asked.
  bool ChangedMayStartLeftWaiting() const;
  // A picture, or what the index holds of it, changed: the round's refusals no longer hold.
  void PicturesChanged() { ++pictures_version_; }
  // Queues the oldest waiting job on the most free server, which no other job is then sent to;
  // true if that server's pass started it at once.
  bool Reserve(int index);
  void Unreserve();
  // changed_ as a list of servers in the order they changed: a server is added when it changes
  // unless it already has (changed_ flag), and the pruning at each round that follows no waiting
  // jobs drops the servers read since (changed no more) but keeps the places of those that
  // changed again. Pruning looks only at the servers read since, not the whole list.
  void ListChanged(int server);
  bool AnyChanged() const { return changed_.size() > changed_dropped_; }
  void PruneChanged();
  void ClearChanged();
  void Round();
  void StartPending();
  void CheckDispatch();

  EngineState& state_;
  ClusterHost& host_;
  std::vector<Picture> pictures_;  // by server
  // Ranks of waiting jobs, oldest first, and the nodes of ranks that left, which the next jobs to
  // join take (a job's place in the queue then allocates nothing).
  std::set<int> queue_;
  std::vector<std::set<int>::node_type> spare_places_;
  bool queue_grew_ = false;  // jobs joined since the last round
  ServerIndex index_;
  std::vector<int> changed_;  // servers to look at again in the next round; -1: dropped since
  size_t changed_dropped_ = 0;
  std::vector<int> read_since_prune_;  // listed servers read since the last pruning
  std::vector<int> round_changed_;     // those of the current round, most free first
  bool round_changed_sorted_ = true;
  bool left_waiting_ = false;  // the last round left jobs waiting
  bool queue_moved_ = false;   // a job left the queue outside a round
  // The last round looked at the waiting jobs up to this rank and left this many waiting; since,
  // this many of them started outside a round.
  int old_until_rank_ = -1, left_waiting_count_ = 0, left_outside_ = 0;
  bool requeued_ = false;  // a job went back into the queue since the last round
  int64_t round_ = 0;
  int reserved_job_ = -1;  // the oldest waiting job, queued on the server it reserved
  int reserved_server_ = -1;
  std::vector<std::pair<int, Launch>> pending_;  // launches of this round, started after it
  // What a request asks but for its GPUs and memory: its owner, sharing and how it may be held.
  // Requests of a kind are ordered by what they ask for (KnownRefused). Numbered in the order
  // they were first refused; by job index (-1: not yet asked).
  // (The owner by number, in owners_.)
  using RequestKind = std::tuple<int, SharingPreference, bool, bool, bool>;
  std::map<std::string, int, std::less<>> owners_;
  std::map<RequestKind, int> kinds_;
  std::vector<int> kind_of_;
  // Per kind, as of pictures_version_ == version: the least memory of a refused request of as
  // many GPUs or fewer (by GPUs, 0 to the server's), of those tried only on the servers that
  // changed (`by_changed`, which every refusal rules out) and of those every eligible server
  // refused (`everywhere`).
  struct Refused {
    uint64_t version = 0;
    std::vector<int64_t> by_changed, everywhere;
  };
  std::vector<Refused> refused_;
  // When a refusal was last noted: none hold unless no picture changed since.
  uint64_t refusals_version_ = 0;
  // The least memory a job left waiting asks for, by its GPUs (0 to the server's): of those the
  // last rounds left waiting (kept while a round passes some over), and of those this round
  // leaves.
  std::vector<int64_t> left_least_, left_next_;
  uint64_t pictures_version_ = 1;
  int requeues_ = 0;
  // How long a GPU's utilization window can keep falling after its last change: the window, or
  // longer while its EMA closes in on the latest value.
  Duration utilization_horizon_{0};
  int64_t idle_free_ = 0;  // free memory of an idle GPU
  // Whether a server could ever run a request of this shape (GPUs, planned memory, sharing).
  std::map<std::tuple<int, int64_t, bool, SharingPreference>, Status> placeable_;
  int64_t dispatch_checks_ = 0, dispatch_violations_ = 0;
  // SimOptions::check_dispatch: since when each waiting job (by rank) could have started.
  std::map<int, TimePoint> startable_since_;
};

}  // namespace colo::sim
