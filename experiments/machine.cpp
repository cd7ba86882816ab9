// The machine fingerprint and build provenance recorded in every result file, read from the
// OS (/proc, /sys) and from what CMake recorded at configure time.
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <sstream>
#include <thread>

#include "build_info.hpp"
#include "sdpa/experiments.hpp"
#include "sdpa/kernels.hpp"

namespace sdpa {
namespace {

std::string first_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// "key : value" lines of /proc/cpuinfo for the first processor.
std::string cpuinfo(const std::string& key) {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(key, 0) != 0) continue;
    const auto colon = line.find(':');
    if (colon != std::string::npos) return line.substr(std::min(colon + 2, line.size()));
  }
  return "";
}

// The ISA extensions that matter for these kernels, as the CPU reports them.
json isa_extensions() {
  static const char* wanted[] = {"sse4_2",   "avx",         "avx2",        "fma",
                                 "f16c",     "avx512f",     "avx512dq",    "avx512bw",
                                 "avx512vl", "avx512_bf16", "avx512_vnni", "avx512_fp16",
                                 "amx_tile", "asimd",       "sve"};
  std::istringstream flags(cpuinfo("flags") + " " + cpuinfo("Features"));
  std::vector<std::string> have;
  for (std::string f; flags >> f;) have.push_back(f);
  json out = json::array();
  for (const char* w : wanted)
    if (std::find(have.begin(), have.end(), w) != have.end()) out.push_back(w);
  return out;
}

json caches() {
  json out = json::array();
  for (int i = 0; i < 8; ++i) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/";
    const std::string size = first_line(dir + "size");
    if (size.empty()) break;
    out.push_back({{"level", std::stoi(first_line(dir + "level"))},
                   {"type", first_line(dir + "type")},
                   {"size", size},
                   {"shared_by_cpus", first_line(dir + "shared_cpu_list")}});
  }
  return out;
}

double meminfo_bytes(const std::string& key) {
  std::ifstream in("/proc/meminfo");
  for (std::string line; std::getline(in, line);)
    if (line.rfind(key + ":", 0) == 0) return std::stod(line.substr(key.size() + 1)) * 1024.0;
  return 0;
}

std::string os_name() {
  std::ifstream in("/etc/os-release");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("PRETTY_NAME=", 0) == 0) {
      std::string v = line.substr(12);
      v.erase(std::remove(v.begin(), v.end(), '"'), v.end());
      return v;
    }
  return "unknown";
}

}  // namespace

int default_threads() {
  const unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
}

double available_memory_bytes() { return meminfo_bytes("MemAvailable"); }

json machine_fingerprint() {
  utsname u{};
  uname(&u);
  std::string model = cpuinfo("model name");
  if (model.empty()) model = "unknown CPU";
  json kernels_isa = json::array();
  for (const auto& k : kernel_registry())
    if (std::find(kernels_isa.begin(), kernels_isa.end(), k.isa) == kernels_isa.end())
      kernels_isa.push_back(k.isa);
  return {{"cpu_model", model},
          {"logical_cores", default_threads()},
          {"architecture", u.machine},
          {"isa_extensions", isa_extensions()},
          {"kernel_isas", kernels_isa},
          {"caches", caches()},
          {"memory_bytes", meminfo_bytes("MemTotal")},
          {"os", os_name()},
          {"kernel", std::string(u.sysname) + " " + u.release}};
}

std::string machine_id(const json& machine) {
  std::string slug;
  for (char c : machine["cpu_model"].get<std::string>()) {
    if (std::isalnum(static_cast<unsigned char>(c)))
      slug += char(std::tolower(c));
    else if (!slug.empty() && slug.back() != '-')
      slug += '-';
  }
  while (!slug.empty() && slug.back() == '-') slug.pop_back();
  const json& isa = machine["isa_extensions"];
  const bool avx512 = std::find(isa.begin(), isa.end(), "avx512f") != isa.end();
  const bool avx2 = std::find(isa.begin(), isa.end(), "avx2") != isa.end();
  if (avx512)
    slug += "-avx512";
  else if (avx2)
    slug += "-avx2";
  return slug + "-" + std::to_string(machine["logical_cores"].get<int>()) + "c";
}

json suite_info() {
  return {{"name", "sdpa-bench"},
          {"version", build_info::kVersion},
          {"git_commit", build_info::kGitCommit},
          {"build_type", build_info::kBuildType},
          {"compiler", build_info::kCompiler},
          {"flags", build_info::kFlags}};
}

}  // namespace sdpa
