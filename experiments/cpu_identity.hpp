// Which CPU this is, beyond its marketing string: vendor, family, model and stepping (cpuid on
// x86, the MIDR register on Arm), the microarchitecture they name, the cache hierarchy cpuid
// describes, and the hypervisor underneath, if any. Two hosts sold as one machine type can
// differ in all of these (and in their measured peaks), so the machine id is built from them.
//
// The decoders are pure functions of register values, so tests can check them on any CPU; the
// readers query the CPU this process runs on.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace sdpa::cpu {

struct Identity {
  std::string vendor;  // "AuthenticAMD", "GenuineIntel"; on Arm the implementer ("ARM", "Apple")
  int family = 0;      // x86: display family; Arm: 8 (the architecture, as /proc/cpuinfo says)
  int model = 0;       // x86: display model; Arm: the MIDR part number
  int stepping = 0;    // x86: stepping; Arm: the MIDR revision (the p of rNpM)
  std::optional<int> variant;         // Arm: the MIDR variant (the r of rNpM)
  std::optional<std::uint64_t> midr;  // Arm: the whole register
  std::string microarchitecture;      // "Zen 4", "Sapphire Rapids", "Neoverse V1"; "" unknown
  std::string brand;                  // x86: cpuid's brand string; "" elsewhere
};

// ---- decoders

// cpuid leaf 1 EAX to display family, model and stepping (Intel SDM vol. 2A, CPUID; AMD APM
// vol. 3, appendix E): the extended family adds to 0xF, the extended model extends families 6
// and 0xF.
void decode_x86_signature(std::uint32_t eax, Identity& id);
// The microarchitecture of an x86 family and model, "" when this table does not know it. AMD's
// ranges are Linux's (arch/x86/kernel/cpu/amd.c), Intel's its intel-family.h.
std::string x86_microarchitecture(const std::string& vendor, int family, int model, int stepping);
// An Arm MIDR_EL1 value to vendor, part, variant, revision and microarchitecture (Linux's
// arch/arm64/include/asm/cputype.h names the parts).
Identity decode_midr(std::uint64_t midr);
// cpuid leaf 0x40000000's 12-byte signature to a hypervisor's name (unknown ones verbatim).
std::string hypervisor_name(const std::string& signature);

// One cache from cpuid leaf 4 (Intel) or 0x8000001D (AMD), which share a layout.
struct Cache {
  int level = 0;
  std::string type;  // "Data", "Instruction", "Unified" (sysfs's words)
  std::int64_t size_bytes = 0;
  int shared_by = 0;  // logical processors sharing it, at most
};
// nullopt for the end of the list (cache type 0).
std::optional<Cache> decode_cache_leaf(std::uint32_t eax, std::uint32_t ebx, std::uint32_t ecx);

// ---- readers of this CPU

Identity identity();
// The caches cpuid describes, for when sysfs has none (some virtual machines); empty on Arm,
// where user code cannot read the cache geometry.
std::vector<Cache> cpuid_caches();
// The hypervisor this runs under, "" on bare metal or when it cannot be told (x86: cpuid's
// hypervisor bit and leaf 0x40000000; Arm: /sys/hypervisor/type, which only Xen fills).
std::string hypervisor();

}  // namespace sdpa::cpu
