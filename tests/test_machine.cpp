// The machine fingerprint: CPU identity decoded from register values (any host can check
// these), the fingerprint of this machine against its schema, and machine ids that tell hosts
// of one machine type apart.
#include <doctest/doctest.h>

#include <fstream>
#include <string>
#include <vector>

#include "cpu_identity.hpp"
#include "sdpa/experiments.hpp"
#include "sdpa/json_schema.hpp"

using sdpa::json;
namespace cpu = sdpa::cpu;

TEST_CASE("x86 signatures: extended family and model, and the microarchitecture they name") {
  cpu::Identity id;
  cpu::decode_x86_signature(0x00a10f11, id);  // this project's CI host: AMD EPYC (Genoa)
  CHECK(id.family == 25);
  CHECK(id.model == 17);
  CHECK(id.stepping == 1);
  CHECK(cpu::x86_microarchitecture("AuthenticAMD", 25, 17, 1) == "Zen 4");
  cpu::decode_x86_signature(0x00b00f21, id);  // family 1Ah model 2: Zen 5 (Turin)
  CHECK(id.family == 0x1a);
  CHECK(id.model == 0x02);
  CHECK(cpu::x86_microarchitecture("AuthenticAMD", 0x1a, 0x02, 1) == "Zen 5");
  CHECK(cpu::x86_microarchitecture("AuthenticAMD", 0x19, 0x01, 1) == "Zen 3");
  CHECK(cpu::x86_microarchitecture("AuthenticAMD", 0x17, 0x31, 0) == "Zen 2");
  cpu::decode_x86_signature(0x000806f8, id);  // Intel family 6 model 8Fh
  CHECK(id.family == 6);
  CHECK(id.model == 0x8f);
  CHECK(id.stepping == 8);
  CHECK(cpu::x86_microarchitecture("GenuineIntel", 6, 0x8f, 8) == "Sapphire Rapids");
  // One model number, three Xeon generations by stepping.
  CHECK(cpu::x86_microarchitecture("GenuineIntel", 6, 0x55, 4) == "Skylake-SP");
  CHECK(cpu::x86_microarchitecture("GenuineIntel", 6, 0x55, 7) == "Cascade Lake");
  CHECK(cpu::x86_microarchitecture("GenuineIntel", 6, 0x55, 11) == "Cooper Lake");
  CHECK(cpu::x86_microarchitecture("GenuineIntel", 6, 0x01, 0).empty());  // unknown: no guess
  CHECK(cpu::x86_microarchitecture("AuthenticAMD", 0x15, 0x02, 0).empty());
}

TEST_CASE("Arm MIDR: implementer, part, variant, revision") {
  const cpu::Identity n1 = cpu::decode_midr(0x414fd0c1);  // as qemu's neoverse-n1 reports it
  CHECK(n1.vendor == "ARM");
  CHECK(n1.model == 0xd0c);
  CHECK(n1.variant == 4);
  CHECK(n1.stepping == 1);
  CHECK(n1.microarchitecture == "Neoverse N1");
  CHECK(cpu::decode_midr(0x411fd401).microarchitecture == "Neoverse V1");
  CHECK(cpu::decode_midr(0x410fd4f0).microarchitecture == "Neoverse V2");
  CHECK(cpu::decode_midr(0x610f0230).vendor == "Apple");
  CHECK(cpu::decode_midr(0x461f0010).microarchitecture == "A64FX");
  const cpu::Identity unknown = cpu::decode_midr(0x000f0510);  // qemu's "max" CPU
  CHECK(unknown.vendor == "implementer 0x0");
  CHECK(unknown.microarchitecture.empty());
}

TEST_CASE("cpuid cache leaves and hypervisor signatures") {
  // L3 of this project's CI host as leaf 0x8000001D describes it: 16 ways, 64-byte lines,
  // 32768 sets, shared by 2 logical processors.
  const auto l3 = cpu::decode_cache_leaf(0x00004163, 0x03c0003f, 0x00007fff);
  REQUIRE(l3);
  CHECK(l3->level == 3);
  CHECK(l3->type == "Unified");
  CHECK(l3->size_bytes == 32 << 20);
  CHECK(l3->shared_by == 2);
  CHECK_FALSE(cpu::decode_cache_leaf(0, 0, 0));  // type 0: end of the list
  CHECK(cpu::hypervisor_name(std::string("KVMKVMKVM\0\0\0", 12)) == "KVM");
  CHECK(cpu::hypervisor_name("Microsoft Hv") == "Hyper-V");
  CHECK(cpu::hypervisor_name("SomethingNew") == "SomethingNew");
}

TEST_CASE("this machine's fingerprint: identity, caches and a valid machine object") {
  const json m = sdpa::machine_fingerprint();
  CAPTURE(m.dump());
  CHECK(!m["cpu_model"].get<std::string>().empty());
  for (const char* key : {"vendor", "family", "model", "stepping", "microarchitecture",
                          "frequency_governor", "transparent_hugepages", "hypervisor"})
    CHECK_MESSAGE(m.contains(key), key);
  if (const json thp = m.value("transparent_hugepages", json()); thp.is_string())  // sysfs's word
    CHECK_MESSAGE((thp == "always" || thp == "madvise" || thp == "never"), thp.dump());
#if defined(__x86_64__) || defined(__aarch64__)
  CHECK(m["vendor"].is_string());  // cpuid or MIDR always names a vendor
#endif
  for (const auto& c : m["caches"]) {
    CHECK(c["level"].get<int>() >= 1);
    CHECK(c["size"].get<std::string>().back() == 'K');
  }
  // Linux fills sysfs from the same cpuid leaves on x86: where both list caches, they agree.
  const auto from_cpuid = cpu::cpuid_caches();
  if (!from_cpuid.empty() && !m["caches"].empty() && !m["caches"][0].contains("source")) {
    REQUIRE(from_cpuid.size() == m["caches"].size());
    for (std::size_t i = 0; i < from_cpuid.size(); ++i) {
      CHECK(m["caches"][i]["level"] == from_cpuid[i].level);
      CHECK(m["caches"][i]["type"] == from_cpuid[i].type);
      CHECK(m["caches"][i]["size"] == std::to_string(from_cpuid[i].size_bytes / 1024) + "K");
    }
  }
  // The machine object is what result files carry: it must pass their schema.
  std::ifstream in("results/schema.json");
  const json results_schema = json::parse(in);
  json machine = results_schema["properties"]["machine"];
  machine["definitions"] = results_schema["definitions"];  // (its $refs)
  const sdpa::JsonSchema machine_schema(machine.dump());
  CHECK(machine_schema.problems(m) == std::vector<std::string>{});
}

TEST_CASE("machine ids tell hosts of one machine type apart") {
  json m = {
      {"cpu_model", "AMD EPYC"}, {"logical_cores", 2}, {"isa_extensions", {"avx2", "avx512f"}}};
  // A fingerprint from before microarchitectures were recorded keeps its old id.
  CHECK(sdpa::machine_id(m) == "amd-epyc-avx512-2c");
  m["family"] = 25, m["model"] = 17, m["microarchitecture"] = "Zen 4";
  const std::string zen4 = sdpa::machine_id(m);
  CHECK(zen4 == "amd-epyc-zen-4-avx512-2c");
  m["family"] = 26, m["model"] = 2, m["microarchitecture"] = "Zen 5";
  CHECK(sdpa::machine_id(m) == "amd-epyc-zen-5-avx512-2c");
  m["microarchitecture"] = nullptr;  // unknown: family and model instead
  CHECK(sdpa::machine_id(m) == "amd-epyc-family26-model2-avx512-2c");
  // A brand that already names the core is not repeated; Arm's widest vector ISA.
  json arm = {{"cpu_model", "ARM Neoverse V1"},
              {"microarchitecture", "Neoverse V1"},
              {"family", 8},
              {"model", 0xd40},
              {"logical_cores", 4},
              {"isa_extensions", {"asimd", "sve"}}};
  CHECK(sdpa::machine_id(arm) == "arm-neoverse-v1-sve-4c");
  arm["isa_extensions"] = {"asimd"};
  CHECK(sdpa::machine_id(arm) == "arm-neoverse-v1-neon-4c");
  // An unknown Arm part: its model names it already (qemu's "max" CPU).
  json qemu = {{"cpu_model", "implementer 0x0 part 0x51"},
               {"microarchitecture", nullptr},
               {"family", 8},
               {"model", 0x51},
               {"midr", "0x000f0510"},
               {"logical_cores", 2},
               {"isa_extensions", {"asimd", "sve", "sve2"}}};
  CHECK(sdpa::machine_id(qemu) == "implementer-0x0-part-0x51-sve2-2c");
}
