// Sweeps split over machines: a run of one shard of a config's cells (`run --shard I/N`), the
// merge of every shard's result file into the file one unsharded run writes (`merge`), and the
// batch scripts that run the shards as a Slurm job array and merge them after (`slurm`).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sdpa/experiments.hpp"

namespace sdpa {

// "I/N" (I from 0 to N-1, N from 1 to kMaxCells) or "slurm": I and N from the environment
// of a Slurm array task, SLURM_ARRAY_TASK_ID and SLURM_ARRAY_TASK_COUNT (an array 0-(N-1)).
// Throws InputError naming `option` (or the variable) with what was expected and found.
Shard parse_shard_option(const std::string& option, const std::string& text);

// A cell's estimated cost (arbitrary units, proportional to its work) from its parameters
// alone: never from the machine, so that every task of a sweep, wherever it runs, computes the
// same split.
double estimated_cost(const Cell& cell);

// The cells of each shard, per experiment (sorted cell indexes): every cell of `plans` in
// exactly one of `count` shards, balanced by estimated cost (the costliest cell first, each to
// the least loaded shard; ties by position, so the split is deterministic). Throws
// InputError when there are more shards than cells.
std::vector<std::vector<std::vector<std::int64_t>>> shard_cells(
    const std::vector<ExperimentPlan>& plans, int count);

// The cells of `shard` alone (see shard_cells).
std::vector<std::vector<std::int64_t>> cells_of_shard(const std::vector<ExperimentPlan>& plans,
                                                      const Shard& shard);

// "<name>" or, for a shard, "<name>-shard-<I>-of-<N>": the stem of a run's default result
// file, so the shards of one config never share a file or a journal.
std::string result_stem(const std::string& config_name, const std::optional<Shard>& shard);

// The result file of a whole sweep from the result files of all its shards, `{path, doc}` each
// in any order. Refused (InputError naming the file, what was expected and what was found)
// unless they are the shards 0 to N-1 of one sweep: the same config SHA-256, seed and suite
// commit, every cell of the config's plan exactly once, and timing or roofline records all
// from one machine (timings of different machines are compared, not merged). Statistics
// records come out identical to an unsharded run's.
json merge_shards(const std::vector<std::pair<std::string, json>>& shards);

// What `sdpa-bench slurm` writes into `folder`: array.sbatch (the job array, one `run --shard
// slurm` per task, each resuming its own journal), merge.sbatch (the merge) and submit.sh
// (submits the array, then the merge with --dependency=afterok on it). `sbatch_options` go
// to both sbatch calls as given.
struct SlurmScripts {
  std::vector<std::pair<std::string, std::string>> files;  // {path, text}
  std::string merged;                                      // the merged result file
};
SlurmScripts slurm_scripts(const Config& config, int shards, const std::string& folder,
                           const std::string& program,
                           const std::vector<std::string>& sbatch_options);

}  // namespace sdpa
