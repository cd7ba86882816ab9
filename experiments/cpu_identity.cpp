// CPU identity from cpuid (x86) or MIDR_EL1 (Arm); see cpu_identity.hpp.
#include "cpu_identity.hpp"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <sstream>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define SDPA_CPUID 1
#elif defined(__aarch64__)
#include <sys/auxv.h>
#endif

namespace sdpa::cpu {
namespace {

struct Range {
  int first, last;
  const char* name;
};

std::string name_in(const Range* begin, const Range* end, int key) {
  for (const Range* r = begin; r != end; ++r)
    if (key >= r->first && key <= r->last) return r->name;
  return "";
}

std::string trimmed(std::string s) {
  const auto keep = [](unsigned char c) { return c != 0 && !std::isspace(c); };
  s.erase(s.begin(), std::find_if(s.begin(), s.end(), keep));
  s.erase(std::find_if(s.rbegin(), s.rend(), keep).base(), s.end());
  return s;
}

#ifndef SDPA_CPUID  // what cpuid tells x86, other architectures read from sysfs
std::string first_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}
#endif

// AMD family 17h-1Ah models, as Linux sorts them into X86_FEATURE_ZEN1..5.
constexpr Range kAmd17[] = {{0x08, 0x08, "Zen+"},  {0x18, 0x18, "Zen+"},  {0x00, 0x2f, "Zen"},
                            {0x30, 0x4f, "Zen 2"}, {0x60, 0x7f, "Zen 2"}, {0x90, 0x91, "Zen 2"},
                            {0xa0, 0xaf, "Zen 2"}};
constexpr Range kAmd19[] = {
    {0x00, 0x0f, "Zen 3"}, {0x10, 0x1f, "Zen 4"}, {0x20, 0x5f, "Zen 3"}, {0x60, 0xaf, "Zen 4"}};
constexpr Range kAmd1a[] = {{0x00, 0x2f, "Zen 5"}, {0x40, 0x4f, "Zen 5"}, {0x60, 0x7f, "Zen 5"}};

// Intel family 6 models (intel-family.h), the cores of servers and of recent desktops.
constexpr Range kIntel6[] = {
    {0x1a, 0x1a, "Nehalem"},        {0x1e, 0x1f, "Nehalem"},         {0x2e, 0x2e, "Nehalem"},
    {0x25, 0x25, "Westmere"},       {0x2c, 0x2c, "Westmere"},        {0x2f, 0x2f, "Westmere"},
    {0x2a, 0x2a, "Sandy Bridge"},   {0x2d, 0x2d, "Sandy Bridge"},    {0x3a, 0x3a, "Ivy Bridge"},
    {0x3e, 0x3e, "Ivy Bridge"},     {0x3c, 0x3c, "Haswell"},         {0x3f, 0x3f, "Haswell"},
    {0x45, 0x46, "Haswell"},        {0x3d, 0x3d, "Broadwell"},       {0x47, 0x47, "Broadwell"},
    {0x4f, 0x4f, "Broadwell"},      {0x56, 0x56, "Broadwell"},       {0x4e, 0x4e, "Skylake"},
    {0x5e, 0x5e, "Skylake"},        {0x8e, 0x8e, "Kaby Lake"},       {0x9e, 0x9e, "Kaby Lake"},
    {0xa5, 0xa6, "Comet Lake"},     {0x66, 0x66, "Cannon Lake"},     {0x6a, 0x6a, "Ice Lake-SP"},
    {0x6c, 0x6c, "Ice Lake-SP"},    {0x7d, 0x7e, "Ice Lake"},        {0x8c, 0x8d, "Tiger Lake"},
    {0xa7, 0xa7, "Rocket Lake"},    {0x8f, 0x8f, "Sapphire Rapids"}, {0xcf, 0xcf, "Emerald Rapids"},
    {0xad, 0xae, "Granite Rapids"}, {0xaf, 0xaf, "Sierra Forest"},   {0x97, 0x97, "Alder Lake"},
    {0x9a, 0x9a, "Alder Lake"},     {0xb7, 0xb7, "Raptor Lake"},     {0xba, 0xba, "Raptor Lake"},
    {0xbf, 0xbf, "Raptor Lake"},    {0xaa, 0xaa, "Meteor Lake"},     {0xac, 0xac, "Meteor Lake"},
    {0xc5, 0xc6, "Arrow Lake"},     {0xbd, 0xbd, "Lunar Lake"},
};

// Arm implementers and their parts (MIDR_EL1: implementer 31:24, variant 23:20, architecture
// 19:16, part 15:4, revision 3:0).
struct Part {
  int implementer, part;
  const char* name;
};
constexpr Part kParts[] = {
    {0x41, 0xd03, "Cortex-A53"},   {0x41, 0xd04, "Cortex-A35"},   {0x41, 0xd05, "Cortex-A55"},
    {0x41, 0xd07, "Cortex-A57"},   {0x41, 0xd08, "Cortex-A72"},   {0x41, 0xd09, "Cortex-A73"},
    {0x41, 0xd0a, "Cortex-A75"},   {0x41, 0xd0b, "Cortex-A76"},   {0x41, 0xd0c, "Neoverse N1"},
    {0x41, 0xd0d, "Cortex-A77"},   {0x41, 0xd40, "Neoverse V1"},  {0x41, 0xd41, "Cortex-A78"},
    {0x41, 0xd44, "Cortex-X1"},    {0x41, 0xd46, "Cortex-A510"},  {0x41, 0xd47, "Cortex-A710"},
    {0x41, 0xd48, "Cortex-X2"},    {0x41, 0xd49, "Neoverse N2"},  {0x41, 0xd4a, "Neoverse E1"},
    {0x41, 0xd4b, "Cortex-A78C"},  {0x41, 0xd4d, "Cortex-A715"},  {0x41, 0xd4e, "Cortex-X3"},
    {0x41, 0xd4f, "Neoverse V2"},  {0x41, 0xd80, "Cortex-A520"},  {0x41, 0xd81, "Cortex-A720"},
    {0x41, 0xd82, "Cortex-X4"},    {0x41, 0xd84, "Neoverse V3"},  {0x41, 0xd8e, "Neoverse N3"},
    {0x46, 0x001, "A64FX"},        {0x48, 0xd01, "TaiShan v110"}, {0x4e, 0x004, "Carmel"},
    {0x61, 0x022, "Apple M1"},     {0x61, 0x023, "Apple M1"},     {0x61, 0x024, "Apple M1 Pro"},
    {0x61, 0x025, "Apple M1 Pro"}, {0x61, 0x028, "Apple M1 Max"}, {0x61, 0x029, "Apple M1 Max"},
    {0x61, 0x032, "Apple M2"},     {0x61, 0x033, "Apple M2"},     {0x61, 0x034, "Apple M2 Pro"},
    {0x61, 0x035, "Apple M2 Pro"}, {0x61, 0x038, "Apple M2 Max"}, {0x61, 0x039, "Apple M2 Max"},
    {0xc0, 0xac3, "AmpereOne"},
};
constexpr Range kImplementers[] = {
    {0x41, 0x41, "ARM"},       {0x42, 0x42, "Broadcom"},  {0x43, 0x43, "Cavium"},
    {0x46, 0x46, "Fujitsu"},   {0x48, 0x48, "HiSilicon"}, {0x4e, 0x4e, "NVIDIA"},
    {0x50, 0x50, "APM"},       {0x51, 0x51, "Qualcomm"},  {0x61, 0x61, "Apple"},
    {0x6d, 0x6d, "Microsoft"}, {0xc0, 0xc0, "Ampere"},
};

#ifdef SDPA_CPUID
std::string register_text(std::initializer_list<unsigned> regs) {
  std::string s;
  for (unsigned r : regs) s.append(reinterpret_cast<const char*>(&r), 4);
  return s;
}
#endif

#ifdef __aarch64__
// MIDR_EL1 from sysfs, else from the register itself (Linux emulates the read for user code
// when HWCAP_CPUID says so, and so does qemu).
std::optional<std::uint64_t> read_midr() {
  const std::string text = first_line("/sys/devices/system/cpu/cpu0/regs/identification/midr_el1");
  if (!text.empty()) return std::stoull(text, nullptr, 16);
  if (getauxval(AT_HWCAP) & HWCAP_CPUID) {
    std::uint64_t midr = 0;
    asm("mrs %0, MIDR_EL1" : "=r"(midr));
    return midr;
  }
  return std::nullopt;
}
#endif

}  // namespace

void decode_x86_signature(std::uint32_t eax, Identity& id) {
  const int base_family = int(eax >> 8) & 0xf, base_model = int(eax >> 4) & 0xf;
  id.stepping = int(eax) & 0xf;
  id.family = base_family == 0xf ? base_family + (int(eax >> 20) & 0xff) : base_family;
  id.model = base_family == 0x6 || base_family == 0xf ? ((int(eax >> 16) & 0xf) << 4) + base_model
                                                      : base_model;
}

std::string x86_microarchitecture(const std::string& vendor, int family, int model, int stepping) {
  if (vendor == "AuthenticAMD") {
    if (family == 0x17) return name_in(std::begin(kAmd17), std::end(kAmd17), model);
    if (family == 0x19) return name_in(std::begin(kAmd19), std::end(kAmd19), model);
    if (family == 0x1a) return name_in(std::begin(kAmd1a), std::end(kAmd1a), model);
  }
  if (vendor == "HygonGenuine" && family == 0x18) return "Dhyana";
  if (vendor == "GenuineIntel" && family == 6) {
    // One model number, three generations of Xeon told apart by stepping.
    if (model == 0x55)
      return stepping >= 10 ? "Cooper Lake" : stepping >= 5 ? "Cascade Lake" : "Skylake-SP";
    return name_in(std::begin(kIntel6), std::end(kIntel6), model);
  }
  return "";
}

Identity decode_midr(std::uint64_t midr) {
  Identity id;
  const int implementer = int(midr >> 24) & 0xff;
  id.midr = midr;
  id.vendor = name_in(std::begin(kImplementers), std::end(kImplementers), implementer);
  if (id.vendor.empty()) {
    std::ostringstream hex;
    hex << "implementer 0x" << std::hex << implementer;
    id.vendor = hex.str();
  }
  id.family = 8;
  id.model = int(midr >> 4) & 0xfff;
  id.variant = int(midr >> 20) & 0xf;
  id.stepping = int(midr) & 0xf;
  for (const auto& p : kParts)
    if (p.implementer == implementer && p.part == id.model) id.microarchitecture = p.name;
  return id;
}

std::string hypervisor_name(const std::string& signature) {
  static const std::pair<const char*, const char*> kKnown[] = {
      {"KVMKVMKVM", "KVM"},     {"Microsoft Hv", "Hyper-V"},    {"VMwareVMware", "VMware"},
      {"XenVMMXenVMM", "Xen"},  {"TCGTCGTCGTCG", "QEMU"},       {"ACRNACRNACRN", "ACRN"},
      {"bhyve bhyve", "bhyve"}, {"VBoxVBoxVBox", "VirtualBox"}, {"lrpepyh  vr", "Parallels"},
      {"QNXQVMBSQG", "QNX"},
  };
  const std::string sig = trimmed(signature);
  for (const auto& [raw, name] : kKnown)
    if (sig == raw) return name;
  return sig.empty() ? "unknown" : sig;
}

std::optional<Cache> decode_cache_leaf(std::uint32_t eax, std::uint32_t ebx, std::uint32_t ecx) {
  static const char* kTypes[] = {"", "Data", "Instruction", "Unified"};
  const unsigned type = eax & 0x1f;
  if (type == 0) return std::nullopt;
  Cache c;
  c.level = int(eax >> 5) & 0x7;
  c.type = type < 4 ? kTypes[type] : "Unknown";
  const std::int64_t ways = (ebx >> 22) + 1, partitions = ((ebx >> 12) & 0x3ff) + 1,
                     line = (ebx & 0xfff) + 1, sets = std::int64_t(ecx) + 1;
  c.size_bytes = ways * partitions * line * sets;
  c.shared_by = int((eax >> 14) & 0xfff) + 1;
  return c;
}

Identity identity() {
  Identity id;
#ifdef SDPA_CPUID
  unsigned a = 0, b = 0, c = 0, d = 0;
  __cpuid(0, a, b, c, d);
  id.vendor = register_text({b, d, c});
  __cpuid(1, a, b, c, d);
  decode_x86_signature(a, id);
  id.microarchitecture = x86_microarchitecture(id.vendor, id.family, id.model, id.stepping);
  if (__get_cpuid_max(0x80000000, nullptr) >= 0x80000004) {
    std::string brand;
    for (unsigned leaf = 0x80000002; leaf <= 0x80000004; ++leaf) {
      __cpuid(leaf, a, b, c, d);
      brand += register_text({a, b, c, d});
    }
    id.brand = trimmed(brand);  // padded with NULs or spaces
  }
#elif defined(__aarch64__)
  if (const auto midr = read_midr()) id = decode_midr(*midr);
#endif
  return id;
}

std::vector<Cache> cpuid_caches() {
  std::vector<Cache> out;
#ifdef SDPA_CPUID
  unsigned a = 0, b = 0, c = 0, d = 0;
  // AMD describes its caches in 0x8000001D when it has topology extensions (0x80000001 ECX
  // bit 22); Intel in leaf 4.
  unsigned leaf = 4;
  if (__get_cpuid(0x80000001, &a, &b, &c, &d) && (c & (1u << 22)) &&
      __get_cpuid_max(0x80000000, nullptr) >= 0x8000001d)
    leaf = 0x8000001d;
  else if (__get_cpuid_max(0, nullptr) < 4)
    return out;
  for (unsigned i = 0; i < 16; ++i) {
    __cpuid_count(leaf, i, a, b, c, d);
    const auto cache = decode_cache_leaf(a, b, c);
    if (!cache) break;
    out.push_back(*cache);
  }
#endif
  return out;
}

std::string hypervisor() {
#ifdef SDPA_CPUID
  unsigned a = 0, b = 0, c = 0, d = 0;
  __cpuid(1, a, b, c, d);
  if ((c & (1u << 31)) == 0) return "";  // the hypervisor-present bit
  __cpuid(0x40000000, a, b, c, d);
  return hypervisor_name(register_text({b, c, d}));
#else
  return first_line("/sys/hypervisor/type");
#endif
}

}  // namespace sdpa::cpu
