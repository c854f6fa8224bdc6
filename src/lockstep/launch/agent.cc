// The agent's keys in its store, for round r: "round{r}.flags" (the first agent's id and the flags every
// agent of the round must share, a line each), "round{r}.slot{k}" (the k-th agent to join: "<id> <shards>
// <host> <pid>"), "round{r}.roster", "round{r}.failed" (the round's first failure, one line),
// "round{r}.final" (set before "failed" when that failure repeats on restart) and "round{r}.done.{id}".
#include "lockstep/launch/agent.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <sstream>
#include <thread>

#include "lockstep/comm/launcher.h"
#include "lockstep/comm/rendezvous.h"
#include "lockstep/core/enforce.h"
#include "lockstep/core/stop_signals.h"
#include "lockstep/launch/shard_processes.h"
#include "lockstep/train/checkpoint.h"

namespace lockstep {
namespace {

using Clock = std::chrono::steady_clock;

volatile std::sig_atomic_t stop_signal = 0, stop_signals = 0;  // the last one, and how many came
int64_t last_signal_ms = 0;                                    // written by the handler only
void OnStopSignal(int signal) {
  // The handler blocks both signals: no other writer runs meanwhile.
  const int64_t now = SignalClockMs();
  if (stop_signals > 0 && now - last_signal_ms < kRepeatedSignalMs) return;  // the same request twice
  last_signal_ms = now;
  stop_signal = signal;
  stop_signals = stop_signals + 1;
}

// Seconds between SIGTERM and SIGKILL for shards stopped after a failure: the survivors may wait on a dead or
// hung peer and save nothing.
constexpr double kFailureStopGrace = 5;

std::chrono::milliseconds Milliseconds(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
}

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

void Say(const std::string& line) {
  std::fprintf(stderr, "lockstep launch: %s\n", line.c_str());
  std::fflush(stderr);
}

std::string FlagsKey(int round) { return fmt::format("round{}.flags", round); }
std::string SlotKey(int round, int slot) { return fmt::format("round{}.slot{}", round, slot); }
std::string RosterKey(int round) { return fmt::format("round{}.roster", round); }
std::string FailedKey(int round) { return fmt::format("round{}.failed", round); }
std::string FinalKey(int round) { return fmt::format("round{}.final", round); }
std::string SignalledKey(int round) { return fmt::format("round{}.signalled", round); }
std::string DoneKey(int round, const std::string& agent) {
  return fmt::format("round{}.done.{}", round, agent);
}
std::string RunId(const std::string& job_id, int round) { return fmt::format("{}_r{}", job_id, round); }

// "shard 2" or "shards 2-5".
std::string ShardRange(int first, int count) {
  return count == 1 ? fmt::format("shard {}", first) : fmt::format("shards {}-{}", first, first + count - 1);
}

// Seconds of waiting for other agents before the first line that says so, and between such lines.
constexpr double kFirstWaitReport = 10, kWaitReportInterval = 60;

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

class Agent {
 public:
  explicit Agent(const AgentOptions& options)
      : options_(options), store_(OpenAgentStore(options.rendezvous, options.job_id)) {}

  int Run() {
    int round = FirstOpenRound();
    while (true) {
      std::string failure;
      if (std::optional<int> code = TakePart(round, &failure)) return *code;
      history_.push_back(failure);
      if (!store_lost_ && store_->Get(FinalKey(round)))
        return GiveUp("would fail the same way on a restart, so none was tried", kExitNotRetryable);
      if (store_lost_ || ++failed_rounds_ > options_.max_restarts) {
        // A failure after the last epoch's checkpoint (in the test pass, say) lost nothing.
        const std::string newest = LatestCheckpoint(options_.checkpoint_directory, options_.save_model_name);
        if (HasEveryEpoch(newest)) {
          Say(fmt::format("{}; {} has all --num_epochs {}: the job is complete", failure, newest,
                          options_.num_epochs));
          return 0;
        }
        return GiveUp(store_lost_
                          ? fmt::format("{} is lost, so no other round can form", store_->description())
                          : fmt::format("--max_restarts {} restarts are spent", options_.max_restarts),
                      kExitFailure);
      }
      ++round;
    }
  }

 private:
  // The first round that has not ended: 0 for a new job. An agent that joins a job again comes after the
  // rounds that failed, and after those that finished: launched again with more --num_epochs, a finished job
  // trains on from its newest checkpoint (with as many, the new round finds it complete).
  int FirstOpenRound() {
    int round = 0;
    while (true) {
      if (store_->Get(FailedKey(round))) {
        if (store_->Get(FinalKey(round)))
          throw InvalidInput(fmt::format("job '{}' in {} stopped in round {}: {}; pass a fresh --job_id",
                                         options_.job_id, store_->description(), round,
                                         store_->Get(FailedKey(round)).value_or("")));
        ++failed_rounds_;
      } else if (!Ended(round)) {
        break;
      }
      ++round;
    }
    if (failed_rounds_ > options_.max_restarts)
      throw InvalidInput(fmt::format("job '{}' in {} already failed {} time{}: pass a fresh --job_id",
                                     options_.job_id, store_->description(), failed_rounds_,
                                     failed_rounds_ == 1 ? "" : "s"));
    return round;
  }

  // A round that found the job complete, or whose shards finished on some agent.
  bool Ended(int round) {
    const std::optional<std::string> text = store_->Get(RosterKey(round));
    if (!text) return false;
    const Roster roster = Roster::Parse(*text);
    return roster.complete || std::any_of(roster.agents.begin(), roster.agents.end(), [&](const auto& agent) {
             return store_->Get(DoneKey(round, agent.first)).has_value();
           });
  }

  // Takes part in `round`: returns the exit code when the job ended (finished, complete or stopped), nothing
  // when the round failed, with its failure.
  std::optional<int> TakePart(int round, std::string* failure) {
    bool formed_before_joining = false;
    std::optional<Roster> roster = Join(round, &formed_before_joining, failure);
    if (!roster) return failure->empty() ? std::optional<int>(Stopped(round)) : std::nullopt;
    if (roster->complete) {
      Say(fmt::format("round {}: {} has all --num_epochs {}: the job is complete", round, roster->checkpoint,
                      options_.num_epochs));
      return 0;
    }
    const bool in_roster = roster->FirstShard(options_.agent_id) >= 0;
    if (in_roster && formed_before_joining) {
      // This agent's id ran in the round before this agent started: its earlier self died, and its shards
      // too.
      *failure = Fail(round, fmt::format("agent {} started again while the round ran", options_.agent_id));
      Say(*failure);
      return std::nullopt;
    }
    if (in_roster && !roster->checkpoint.empty()) {
      if (std::optional<std::string> missing = MissingHere(roster->checkpoint)) {
        // The agent that formed the round found it in its --file_store_path; every restart would look there.
        *failure = FailForGood(round, *missing);
        Say(*failure);
        return std::nullopt;
      }
    }
    if (!in_roster) {
      Say(fmt::format("round {} formed without this agent ({} agents at most); waiting for it to end", round,
                      options_.max_nodes));
      std::optional<bool> finished = WaitForEnd(round, *roster, failure);
      if (!finished) return Stopped(round);
      return *finished ? std::optional<int>(0) : std::nullopt;
    }
    if (RunRound(round, *roster, failure)) return 0;
    if (stop_signal) return Stopped(round);
    return std::nullopt;
  }

  // Why `checkpoint`, which the agent that formed the round found, cannot be read on this machine; nothing
  // when it can. A file just written elsewhere may take a moment to show on a network filesystem.
  std::optional<std::string> MissingHere(const std::string& checkpoint) {
    std::error_code error;
    for (int look = 0; look < 10; ++look, std::this_thread::sleep_for(std::chrono::milliseconds(500)))
      if (std::filesystem::exists(checkpoint, error)) return std::nullopt;
    if (error)
      return fmt::format("the round resumes from {}, which {} cannot read: {}", checkpoint, HostName(),
                         error.message());
    return fmt::format(
        "the round resumes from {}, which is not on {}: with several machines, "
        "--file_store_path must be a directory they all share",
        checkpoint, HostName());
  }

  std::string RoundFailure(int round, const std::string& what) const {
    return fmt::format("round {} (run id {}): {}", round, RunId(options_.job_id, round), what);
  }

  // Publishes `what` as the failure of `round`, unless one came first; returns the round's failure.
  std::string Fail(int round, const std::string& what) {
    store_->Create(FailedKey(round), RoundFailure(round, what));
    return store_->Get(FailedKey(round)).value_or("");
  }

  // Fail() for a failure that every restart would meet again, so that the agents give up: final only when it
  // is the round's first failure (a shard's refusal can follow another's death).
  std::string FailForGood(int round, const std::string& what) {
    if (!store_->Get(FailedKey(round))) store_->Create(FinalKey(round), "");
    return Fail(round, what);
  }

  // While shards run, `use` of the store; when the store cannot be reached (after its minute of trying to
  // connect again), says so once and goes on without it: the running shards need it no more, and a failure
  // of another agent's shard reaches them through their own connections. False without the store.
  bool WithStore(const std::function<void()>& use) {
    if (store_lost_) return false;
    try {
      use();
      return true;
    } catch (const IoError& e) {
      LoseStore(e.what());
      return false;
    }
  }

  void LoseStore(const std::string& why) {
    store_lost_ = true;
    Say(
        fmt::format("{}; the shards run on without it (a failure elsewhere reaches them through their "
                    "connections), but no other round can form",
                    why));
  }

  // What a look at the store found while shards run: the round's failure, whether some agent's shards
  // finished, and why the store could not be read ("" when it could).
  struct StoreLook {
    std::optional<std::string> failure;
    bool finished_somewhere = false;
    std::string lost;
  };

  // Looks at the store on a thread of its own: a Redis server that answers nothing (for up to its minute of
  // connecting again) holds neither the shards' output nor the noticing of their exits or of a Ctrl-C (what
  // the agent then publishes waits for the store).
  std::future<StoreLook> LookAtStore(int round, const Roster& roster) {
    return std::async(std::launch::async, [this, round, &roster] {
      StoreLook look;
      try {
        look.failure = store_->Get(FailedKey(round));
        for (const auto& agent : roster.agents)
          look.finished_somewhere = look.finished_somewhere || store_->Get(DoneKey(round, agent.first));
      } catch (const IoError& e) {
        look.lost = e.what();
      }
      return look;
    });
  }

  // Publishes `what` as the failure of `round` where the store can be reached; returns the round's failure.
  std::string PublishFailure(int round, const std::string& what, bool final) {
    std::string failure = RoundFailure(round, what);
    WithStore([&] { failure = final ? FailForGood(round, what) : Fail(round, what); });
    return failure;
  }

  // Claims a place in `round` and waits until the round forms. Nothing when the agent was stopped, or when
  // the round failed before it formed (then with its failure: an agent that claimed a place has exited). Says
  // in `formed_before_joining` whether the round had formed before this agent came.
  std::optional<Roster> Join(int round, bool* formed_before_joining, std::string* failure) {
    if (auto text = store_->Get(RosterKey(round))) {
      *formed_before_joining = true;
      return Roster::Parse(*text);
    }
    if (std::optional<std::string> differ = FlagsDiffer(round)) {
      *failure = FailForGood(round, *differ);  // every restart would find the same flags
      Say(*failure);
      return std::nullopt;
    }
    const std::string claim =
        fmt::format("{} {} {} {}", options_.agent_id, options_.nproc_per_node, HostName(), getpid());
    auto take_place = [&] {
      for (int k = 0; k < options_.max_nodes; ++k)
        if (store_->Create(SlotKey(round, k), claim)) return k;
      return -1;  // the round's --nnodes MAX agents came first: it forms without this one
    };
    int slot = take_place();
    const auto start = Clock::now();
    double next_report = kFirstWaitReport;
    bool enough = false;  // MIN agents have joined, since enough_since
    Clock::time_point enough_since;
    while (!stop_signal) {
      if (auto text = store_->Get(RosterKey(round))) return Roster::Parse(*text);
      if (std::optional<std::string> gone = GoneAgentHere(round))
        Fail(round, fmt::format("agent {} exited before the round formed", *gone));
      if (auto failed = store_->Get(FailedKey(round))) {
        *failure = *failed;
        Say(*failure);
        return std::nullopt;
      }
      if (slot >= 0 && store_->Get(SlotKey(round, slot)) != claim) {
        // A Redis server started again empty lost the agents' places: each takes one again.
        Say(fmt::format(
            "round {}: this agent's place in {} is gone (the store lost its keys); taking one again", round,
            store_->description()));
        if (std::optional<std::string> differ = FlagsDiffer(round)) {  // that key went too
          *failure = FailForGood(round, *differ);
          Say(*failure);
          return std::nullopt;
        }
        slot = take_place();
      }
      int joined = 0;
      while (joined < options_.max_nodes && store_->Get(SlotKey(round, joined))) ++joined;
      if (slot < 0 && joined < options_.max_nodes) slot = take_place();  // a place came free
      if (joined < options_.min_nodes) {
        enough = false;
      } else if (!enough) {
        enough = true;
        enough_since = Clock::now();
      }
      const bool full = joined >= options_.max_nodes;
      if (slot >= 0 && (full || (enough && SecondsSince(enough_since) >= options_.join_grace))) {
        store_->Create(RosterKey(round), FormRoster(round, joined).ToText());
        continue;
      }
      if (!enough && SecondsSince(start) >= next_report) {
        Say(
            fmt::format("round {}: {} of at least {} agents joined job '{}' in {} after {:.0f} s; waiting up "
                        "to --join_timeout {:g} s",
                        round, joined, options_.min_nodes, options_.job_id, store_->description(),
                        SecondsSince(start), options_.join_timeout));
        next_report += kWaitReportInterval;
      }
      if (slot < 0 && SecondsSince(start) > options_.join_timeout)
        throw IoError(fmt::format(
            "round {}: --nnodes {} agents took the places of job '{}' in {}, but their "
            "round did not form within --join_timeout {:g} s; are they still running?",
            round, options_.max_nodes, options_.job_id, store_->description(), options_.join_timeout));
      if (!enough && SecondsSince(start) > options_.join_timeout)
        throw IoError(
            fmt::format("round {}: {} of at least {} agents joined job '{}' in {} within {} s; start "
                        "an agent on each machine with the same --job_id and --rdzv, or raise "
                        "--join_timeout",
                        round, joined, options_.min_nodes, options_.job_id, store_->description(),
                        options_.join_timeout));
      std::this_thread::sleep_for(std::min(Milliseconds(options_.monitor_interval), Milliseconds(0.1)));
    }
    return std::nullopt;
  }

  // Why this agent may not take part in `round`: a flag that the agents act on differs from the round's
  // first agent's (the shards would get that one's global batch; their restarts would end the job while
  // others waited); nothing when they agree. The shards compare the other training flags themselves, and
  // some differ by machine (--distributed_interfaces, --log_dir).
  std::optional<std::string> FlagsDiffer(int round) {
    const std::vector<std::string> mine = {
        fmt::format("--nnodes {}:{}", options_.min_nodes, options_.max_nodes),
        fmt::format("--max_restarts {}", options_.max_restarts),
        fmt::format("--batch_size {}", options_.batch_size),
        fmt::format("--num_epochs {}", options_.num_epochs),
        fmt::format("--save_model_name {}", options_.save_model_name)};
    std::string text = options_.agent_id;
    for (const std::string& flag : mine) text += "\n" + flag;
    store_->Create(FlagsKey(round), text);
    std::vector<std::string> theirs = Lines(store_->Get(FlagsKey(round)).value_or(""));
    if (theirs.empty() || theirs[0] == options_.agent_id) return std::nullopt;
    for (size_t i = 0; i < mine.size(); ++i)
      if (i + 1 >= theirs.size() || theirs[i + 1] != mine[i])
        return fmt::format("agent {} has `{}` where agent {} has `{}`; start every agent with the same flags",
                           options_.agent_id, mine[i], theirs[0], i + 1 < theirs.size() ? theirs[i + 1] : "");
    return std::nullopt;
  }

  // The roster of the first `joined` agents. No shard of the job runs now (every agent joins only after
  // stopping its own), so the newest checkpoint cannot change under the agents' feet.
  Roster FormRoster(int round, int joined) {
    Roster roster;
    for (int k = 0; k < joined; ++k) {
      std::istringstream in(store_->Get(SlotKey(round, k)).value_or(""));
      std::pair<std::string, int> agent;
      in >> agent.first >> agent.second;
      roster.agents.push_back(agent);
    }
    std::sort(roster.agents.begin(), roster.agents.end());
    std::optional<std::string> previous = round > 0 ? store_->Get(RosterKey(round - 1)) : std::nullopt;
    roster.global_batch =
        previous ? Roster::Parse(*previous).global_batch : options_.batch_size * roster.num_shards();
    std::vector<std::string> skipped;
    roster.checkpoint = LatestCheckpoint(options_.checkpoint_directory, options_.save_model_name, &skipped);
    for (const std::string& why : skipped) Say(fmt::format("round {}: passed over {}", round, why));
    roster.complete = HasEveryEpoch(roster.checkpoint);
    return roster;
  }

  bool HasEveryEpoch(const std::string& checkpoint) const {
    return !checkpoint.empty() && CheckpointEpochsDone(checkpoint) >= options_.num_epochs;
  }

  // Runs this agent's shards of `round` until they all exit 0 (true) or the round fails (false, with the
  // failure that ended it) or the agent is stopped (false).
  bool RunRound(int round, const Roster& roster, std::string* failure) {
    const int first = roster.FirstShard(options_.agent_id);
    std::vector<std::vector<std::string>> argvs;
    std::vector<int> ids;
    for (int k = 0; k < options_.nproc_per_node; ++k) {
      ids.push_back(first + k);
      argvs.push_back(ShardArguments(options_, roster, round, first + k));
    }
    ShardProcesses shards(argvs, ids, LauncherShardVariables());  // shards take the agent's numbers
    std::string pids;
    for (size_t k = 0; k < ids.size(); ++k)
      pids += fmt::format("{}shard {} pid {}", k ? ", " : "", ids[k], shards.pids()[k]);
    Say(fmt::format("round {}: run id {}, {} shard{}, batch {} per shard, {}; started {}", round,
                    RunId(options_.job_id, round), roster.num_shards(), roster.num_shards() == 1 ? "" : "s",
                    roster.global_batch / roster.num_shards(),
                    roster.checkpoint.empty() ? "fresh start" : "resuming from " + roster.checkpoint, pids));
    const auto interval = Milliseconds(options_.monitor_interval);
    auto last_look = Clock::now();
    std::future<StoreLook> look;  // one at a time
    std::optional<std::string> published;
    std::optional<Clock::time_point> first_finished;  // when a shard of the job was first seen to finish
    while (!published && !stop_signal) {
      std::vector<ShardExit> exits = shards.Poll(interval);
      if (!first_finished &&
          std::any_of(exits.begin(), exits.end(), [](const ShardExit& e) { return e.ok(); }))
        first_finished = Clock::now();
      // Of the shards that ended together, one killed by a signal is the likelier cause.
      auto bad = std::find_if(exits.begin(), exits.end(), [](const ShardExit& e) { return e.signal != 0; });
      if (bad == exits.end())
        bad = std::find_if(exits.begin(), exits.end(), [](const ShardExit& e) { return !e.ok(); });
      if (bad != exits.end()) {
        published =
            PublishFailure(round,
                           fmt::format("shard {} {} after {:.1f} s{}", bad->shard, bad->Describe(),
                                       bad->seconds, bad->last_error.empty() ? "" : ": " + bad->last_error),
                           bad->exit_code == kExitNotRetryable);
      } else if (shards.AllExited()) {
        WithStore([&] { store_->Create(DoneKey(round, options_.agent_id), "done"); });
        Say(fmt::format("round {}: {} finished", round, ShardRange(first, options_.nproc_per_node)));
        // Shards of a job end well only together, at its end.
        const std::string newest =
            options_.save_model_name.empty()
                ? ""
                : LatestCheckpoint(options_.checkpoint_directory, options_.save_model_name);
        Say(fmt::format("job '{}' finished in round {}{}", options_.job_id, round,
                        newest.empty() ? "" : "; its last checkpoint: " + newest));
        return true;
      } else if (first_finished && SecondsSince(*first_finished) > options_.straggler_timeout) {
        // Its peers are done and wait for nothing from it: a stopped or hung shard would hold the job
        // forever.
        published = PublishFailure(
            round,
            fmt::format("a shard still runs {:.0f} s after another one finished (the longer of --timeout "
                        "and --first_iter_timeout, {} s): it is stalled",
                        SecondsSince(*first_finished), options_.straggler_timeout),
            false);
      } else if (look.valid() && look.wait_for(std::chrono::seconds(0)) == std::future_status::ready) {
        StoreLook seen = look.get();
        if (!seen.lost.empty() && !store_lost_) LoseStore(seen.lost);
        published = seen.failure;
        if (seen.finished_somewhere && !first_finished) first_finished = Clock::now();
        last_look = Clock::now();
      } else if (!look.valid() && !store_lost_ && Clock::now() - last_look >= interval) {
        look = LookAtStore(round, roster);
      }
    }
    bool signalled = stop_signal;
    if (stop_signal) {
      WithStore([&] {
        store_->Create(SignalledKey(round), options_.agent_id);  // before the failure that others act on
        Fail(round, fmt::format("agent {} was stopped by signal {}", options_.agent_id,
                                static_cast<int>(stop_signal)));
      });
    } else {
      Say(fmt::format("{}; stopping {}", *published, ShardRange(first, options_.nproc_per_node)));
      WithStore([&] { signalled = store_->Get(SignalledKey(round)).has_value(); });
    }
    // Stopped by a signal, here or at another agent, every shard lives: they agree on a step, finish it, and
    // shard 0 saves a checkpoint (train/stop_vote.h).
    const double grace = signalled ? options_.stop_grace : kFailureStopGrace;
    if (signalled && grace > 0)
      Say(fmt::format("stopping {}: they finish the step{}; SIGKILL in {:g} s (--stop_grace){}",
                      ShardRange(first, options_.nproc_per_node),
                      options_.save_model_name.empty() ? "" : " and shard 0 saves a checkpoint", grace,
                      stop_signal ? ", or at the next Ctrl-C" : ""));
    else if (signalled)
      Say(fmt::format(
          "stopping {} with SIGKILL (--stop_grace 0): no step is finished and no checkpoint saved",
          ShardRange(first, options_.nproc_per_node)));
    const int signals_seen = stop_signals;
    shards.Stop(Milliseconds(grace), [signals_seen] { return stop_signals > signals_seen; });
    if (published) *failure = *published;
    return false;
  }

  // Waits for the end of a round this agent is not part of: true when it finished, false when it failed (with
  // its failure), nothing when the agent was stopped.
  std::optional<bool> WaitForEnd(int round, const Roster& roster, std::string* failure) {
    while (!stop_signal) {
      if (std::optional<std::string> gone = GoneAgentHere(round))
        Fail(round, fmt::format("agent {} has exited", *gone));
      if (auto failed = store_->Get(FailedKey(round))) {
        *failure = *failed;
        Say(*failure);
        return false;
      }
      for (const auto& [agent, shards] : roster.agents)
        if (store_->Get(DoneKey(round, agent))) {
          Say(fmt::format("job '{}' finished in round {}", options_.job_id, round));
          return true;
        }
      std::this_thread::sleep_for(Milliseconds(options_.monitor_interval));
    }
    return std::nullopt;
  }

  // An agent of `round` that ran on this machine and has exited without ending the round ("<id> (pid P)"):
  // its shards died with it, so the round cannot finish.
  std::optional<std::string> GoneAgentHere(int round) {
    for (int k = 0; k < options_.max_nodes; ++k) {
      std::optional<std::string> claim = store_->Get(SlotKey(round, k));
      if (!claim) break;
      std::istringstream in(*claim);
      std::string id, host;
      int shards = 0;
      long pid = 0;
      in >> id >> shards >> host >> pid;
      if (ExitedHere(host, pid) && !store_->Get(DoneKey(round, id)))
        return fmt::format("{} (pid {})", id, pid);
    }
    return std::nullopt;
  }

  int Stopped(int round) {
    Say(fmt::format("stopped by signal {} in round {}", static_cast<int>(stop_signal), round));
    return 128 + stop_signal;
  }

  // Lists the failures and ends the job with one line saying `why` it was not restarted again; returns
  // `code`, kExitNotRetryable where a restart of the agent would fail the same way.
  int GiveUp(const std::string& why, int code) {
    for (size_t k = 0; k < history_.size(); ++k) Say(fmt::format("failure {}: {}", k + 1, history_[k]));
    const bool has_checkpoint =
        !options_.save_model_name.empty() &&
        !CheckpointsOf(options_.checkpoint_directory, options_.save_model_name).empty();
    std::fprintf(
        stderr,
        "lockstep: error: job '%s' failed %zu time%s and %s (the failures are listed above; the last: "
        "%s)%s\n",
        options_.job_id.c_str(), history_.size(), history_.size() == 1 ? "" : "s", why.c_str(),
        history_.back().c_str(), has_checkpoint ? "; the newest checkpoint is kept for a later run" : "");
    return code;
  }

  const AgentOptions& options_;
  std::unique_ptr<AgentStore> store_;
  std::vector<std::string> history_;  // one line per failed round this agent took part in
  int failed_rounds_ = 0;             // of the job, those before this agent came too
  bool store_lost_ = false;           // it could not be reached while shards ran: no round forms again
};

}  // namespace

std::vector<std::string> ShardArguments(const AgentOptions& options, const Roster& roster, int round,
                                        int shard_id) {
  const int num_shards = roster.num_shards();
  std::vector<std::string> args = {options.program, "train"};
  args.insert(args.end(), options.train_arguments.begin(), options.train_arguments.end());
  const std::vector<std::string> job = {
      "--num_shards", std::to_string(num_shards),
      "--shard_id",   std::to_string(shard_id),
      "--run_id",     RunId(options.job_id, round),
      "--batch_size", std::to_string(BatchForShards(roster.global_batch, num_shards))};
  args.insert(args.end(), job.begin(), job.end());
  const AgentStoreAddress& where = options.rendezvous;
  if (!where.redis_host.empty())
    args.insert(args.end(),
                {"--redis_host", where.redis_host, "--redis_port", std::to_string(where.redis_port)});
  else if (!options.train_names_file_store)
    args.insert(args.end(), {"--file_store_path", where.directory});
  if (!roster.checkpoint.empty()) args.insert(args.end(), {"--load_model_path", roster.checkpoint});
  return args;
}

int RunAgent(const AgentOptions& options) {
  struct sigaction action = {};
  action.sa_handler = OnStopSignal;
  sigemptyset(&action.sa_mask);
  sigaddset(&action.sa_mask, SIGINT);
  sigaddset(&action.sa_mask, SIGTERM);
  sigaction(SIGINT, &action, nullptr);  // no SA_RESTART: a wait returns at once
  sigaction(SIGTERM, &action, nullptr);
  return Agent(options).Run();
}

}  // namespace lockstep
