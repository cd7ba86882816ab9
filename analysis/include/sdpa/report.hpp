// Tables regenerated from result files alone: their schema is the contract, no experiment
// code runs. Output is deterministic (fixed number formatting, records in file order).
#pragma once

#include <string>
#include <vector>

#include "sdpa/record.hpp"

namespace sdpa::report {

struct ResultFile {
  std::string path;
  json doc;
};

// How a result file's checksum (contents_sha256) is held to: a file whose contents do not
// match it, or that has none, is refused unless allow_edited, which reads it with "edited":
// true added, so every output made from it says so.
struct ReadOptions {
  bool allow_edited = false;
};

// Reads a result file and checks it is one this version understands (results/schema.json) and
// can make tables from, unedited since it was written. Throws InputError naming the file, and
// where there is one the JSON path, when it is missing, larger than 1 GiB, not JSON,
// truncated, not a result file, of another schema_version, not as the schema says, or edited.
json read_result_file(const std::string& path, const ReadOptions& options = {});
// The same on a file's bytes already in memory; `path` only labels messages.
json parse_result_file(const std::string& path, const std::string& text,
                       const ReadOptions& options = {});
// The text of a result file: `doc` with its checksum (contents_sha256) written last.
std::string result_file_text(json doc);
// Whether a file was read with --allow-edited against its checksum (ReadOptions).
bool edited(const json& doc);

// The schema result files are checked against (results/schema.json is a copy, for editors):
// kinds/result.schema.json with each kind's record.schema.json, schema_version
// kResultSchemaVersion.
const json& result_schema();

struct Table {
  std::string title;
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
  std::string note;  // printed under the table
};

// The tables of every experiment of the given result files, in file and experiment order.
std::vector<Table> tables(const std::vector<json>& results);

// The experiment kinds whose records this version tabulates, in the order of kinds/kinds.cmake
// (sdpa::experiment_kinds(), the kinds that write records, are the same; a test checks).
std::vector<std::string> kind_names();

std::string markdown(const std::vector<Table>& tables);

// `text` with each Markdown table's columns padded to one width (UTF-8 characters), right-
// aligned where the separator says "---:", for reading on a terminal; lines outside tables are
// left as they are. Still Markdown, as the unpadded text is.
std::string aligned_tables(const std::string& text);

// Tidy CSV: one file per experiment (records of the same experiment name and kind from every
// file together), one row per record, one column per field (nested fields joined with '.',
// a ci95 pair as .ci95_low and .ci95_high). Numbers are written with 17 significant digits,
// so they parse back to the same doubles. With several files, `machine_id` and `file` lead.
struct CsvFile {
  std::string name;  // e.g. "score-variance.csv"
  std::string text;
};
std::vector<CsvFile> csv_files(const std::vector<ResultFile>& results);

// Fixed formatting shared by every table: whole numbers (sizes, counts) in full, everything else
// with `significant` digits (4 in tables; 17 in CSV files, which round-trip a double).
std::string number(double x, int significant = 4);
// The same of a value read from a result file: null (how a file stores a non-finite number)
// as NaN; any other non-number throws JsonTypeError (sdpa/json_read.hpp), which names its path.
std::string number(const json& x, int significant = 4);
// A time with its unit: "812.3 ns", "45.6 µs", "1.234 ms", "2.5 s".
std::string duration(double seconds);
// The same of a time read from a result file; a non-number throws JsonTypeError.
std::string duration(const json& seconds);
// A timing cell's shape from its params: "query heads[/K-V heads when grouped]×n_q×n_kv, d
// d_k/d_v[, causal]", heads counted over the batch.
std::string timing_shape(const json& params);
// Whether a timing record is bound by memory while its bytes fit in the last-level cache, so it
// read that cache rather than memory (fits_llc; records from before it never are).
bool reads_cache(const json& record);
// Which roof binds a timing record: "memory", "memory, fits LLC" (reads_cache), "compute"; "-"
// without one.
std::string timing_bound(const json& record);

}  // namespace sdpa::report
