// The machine fingerprint and build provenance recorded in every result file, read from the
// CPU (cpu_identity.hpp), the OS (/proc, /sys) and what CMake recorded at configure time.
#include <sys/utsname.h>
#include <unistd.h>
#ifdef __aarch64__
#include <sys/auxv.h>
#include <sys/prctl.h>
#endif

#include <algorithm>
#include <cctype>
#include <fstream>
#include <iomanip>
#include <sstream>
#include <thread>
#include <utility>

#include "build_info.hpp"
#include "cpu_identity.hpp"
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

// Linux's transparent huge page mode, the bracketed word of sysfs's "always [madvise] never";
// "" without one (no file: no '['). Under "madvise" the suite's buffers take 4 KiB pages, on
// which a decode streaming K and V from memory measured slower
// (docs/perf-log/2026-11-30-int8-avx2-host-modes.md).
std::string transparent_hugepages() {
  const std::string line = first_line("/sys/kernel/mm/transparent_hugepage/enabled");
  const auto open = line.find('['), close = line.find(']', open);
  return close == std::string::npos ? "" : line.substr(open + 1, close - open - 1);
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

// The ISA extensions that matter for these kernels, as the CPU reports them: /proc/cpuinfo's
// flags on x86; on aarch64 the kernel's hardware capabilities (what /proc/cpuinfo's Features
// line prints, but also right under qemu, which shows the host's /proc/cpuinfo).
json isa_extensions() {
  json out = json::array();
#ifdef __aarch64__
  const unsigned long hwcap = getauxval(AT_HWCAP), hwcap2 = getauxval(AT_HWCAP2);
  const std::pair<const char*, bool> flags[] = {
      {"asimd", hwcap & HWCAP_ASIMD},     {"asimdhp", hwcap & HWCAP_ASIMDHP},
      {"asimddp", hwcap & HWCAP_ASIMDDP}, {"sve", hwcap & HWCAP_SVE},
      {"sve2", hwcap2 & HWCAP2_SVE2},     {"bf16", hwcap2 & HWCAP2_BF16},
      {"i8mm", hwcap2 & HWCAP2_I8MM}};
  for (const auto& [name, present] : flags)
    if (present) out.push_back(name);
#else
  static const char* wanted[] = {
      "sse4_2",   "avx",      "avx2",     "fma",         "f16c",        "avx_vnni",    "avx512f",
      "avx512dq", "avx512bw", "avx512vl", "avx512_bf16", "avx512_vnni", "avx512_fp16", "amx_tile"};
  std::istringstream flags(cpuinfo("flags"));
  std::vector<std::string> have;
  for (std::string f; flags >> f;) have.push_back(f);
  for (const char* w : wanted)
    if (std::find(have.begin(), have.end(), w) != have.end()) out.push_back(w);
#endif
  return out;
}

// The caches sysfs lists for cpu0, else (some virtual machines list none) those cpuid
// describes, each marked with its source.
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
  if (!out.empty()) return out;
  for (const auto& c : cpu::cpuid_caches())
    out.push_back({{"level", c.level},
                   {"type", c.type},
                   {"size", std::to_string(c.size_bytes / 1024) + "K"},  // sysfs's notation
                   {"shared_by_logical_cpus", c.shared_by},
                   {"source", "cpuid"}});
  return out;
}

// A name for people: cpuid's brand string on x86 (what /proc/cpuinfo calls "model name"), the
// implementer and part on Arm, which have no brand string.
std::string cpu_model(const cpu::Identity& id) {
  if (!id.brand.empty()) return id.brand;
  if (id.midr) {
    std::ostringstream part;
    part << "part 0x" << std::hex << id.model;
    return id.vendor + " " + (id.microarchitecture.empty() ? part.str() : id.microarchitecture);
  }
  const std::string model = cpuinfo("model name");
  return model.empty() ? "unknown CPU" : model;
}

// Lower-case letters and digits, runs of anything else as one '-'.
std::string slug(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (std::isalnum(static_cast<unsigned char>(c)))
      out += char(std::tolower(static_cast<unsigned char>(c)));
    else if (!out.empty() && out.back() != '-')
      out += '-';
  }
  while (!out.empty() && out.back() == '-') out.pop_back();
  return out;
}

bool has(const json& list, const char* item) {
  return std::find(list.begin(), list.end(), item) != list.end();
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

std::string frequency_governor() {
  return first_line("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor");
}

json machine_fingerprint() {
  utsname u{};
  uname(&u);
  const cpu::Identity id = cpu::identity();
  json kernels_isa = json::array();
  for (const auto& k : kernel_registry())
    if (std::find(kernels_isa.begin(), kernels_isa.end(), k.isa) == kernels_isa.end())
      kernels_isa.push_back(k.isa);
  const auto or_null = [](const std::string& s) { return s.empty() ? json(nullptr) : json(s); };
  json machine = {{"cpu_model", cpu_model(id)},
                  {"vendor", or_null(id.vendor)},
                  {"family", id.family},
                  {"model", id.model},
                  {"stepping", id.stepping},
                  {"microarchitecture", or_null(id.microarchitecture)},
                  {"logical_cores", default_threads()},
                  {"architecture", u.machine},
                  {"isa_extensions", isa_extensions()},
                  {"kernel_isas", kernels_isa},
                  {"caches", caches()},
                  {"memory_bytes", meminfo_bytes("MemTotal")},
                  {"frequency_governor", or_null(frequency_governor())},
                  {"transparent_hugepages", or_null(transparent_hugepages())},
                  {"hypervisor", or_null(cpu::hypervisor())},
                  {"os", os_name()},
                  {"kernel", std::string(u.sysname) + " " + u.release}};
  if (id.midr) {
    std::ostringstream midr;
    midr << "0x" << std::hex << std::setw(8) << std::setfill('0') << *id.midr;
    machine["midr"] = midr.str();
    machine["variant"] = *id.variant;
  }
#ifdef __aarch64__
  if (getauxval(AT_HWCAP) & HWCAP_SVE)
    machine["sve_vector_bits"] = 8 * (prctl(PR_SVE_GET_VL) & PR_SVE_VL_LEN_MASK);
#endif
  return machine;
}

// <brand>-<microarchitecture>-<widest vector ISA>-<cores>c, e.g. "amd-epyc-zen-4-avx512-2c" or
// "arm-neoverse-v1-sve-2c": hosts sold as one machine type but built on different cores land
// in different folders. The microarchitecture is left out when the brand already names it and
// replaced by family and model when it is unknown. Files written before the fingerprint had a
// microarchitecture keep the id they were written with (result files carry their machine_id).
std::string machine_id(const json& machine) {
  std::string id = slug(machine["cpu_model"].get<std::string>());
  if (machine.contains("microarchitecture")) {
    std::string core;
    if (machine["microarchitecture"].is_string())
      core = slug(machine["microarchitecture"].get<std::string>());
    else if (!machine.contains("midr"))  // an unknown Arm core's model names its part already
      core = "family" + std::to_string(machine["family"].get<int>()) + "-model" +
             std::to_string(machine["model"].get<int>());
    if (!core.empty() && ("-" + id + "-").find("-" + core + "-") == std::string::npos)
      id += "-" + core;
  }
  const json& isa = machine["isa_extensions"];
  if (has(isa, "avx512f"))
    id += "-avx512";
  else if (has(isa, "avx2"))
    id += "-avx2";
  else if (has(isa, "sve2"))
    id += "-sve2";
  else if (has(isa, "sve"))
    id += "-sve";
  else if (has(isa, "asimd"))
    id += "-neon";
  return id + "-" + std::to_string(machine["logical_cores"].get<int>()) + "c";
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
