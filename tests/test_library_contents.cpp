// What libtributary.so is made of, read from its ELF file: it never needs libcuda (the driver is
// reached at run time only, so the library loads without one) nor a shared CUDA runtime, and a
// CUDA build carries machine code for Hopper and Blackwell plus PTX for later chips.
#include <elf.h>
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <set>
#include <string>
#include <vector>

#include "cuda/cuda_api.hpp"

namespace trib {
namespace {

std::vector<char> readFile(const char* path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<char>(std::istreambuf_iterator<char>(f), {});
}

struct Elf {
  std::vector<char> data;
  const Elf64_Ehdr* header() const { return reinterpret_cast<const Elf64_Ehdr*>(data.data()); }
  const Elf64_Shdr* section(int i) const {
    return reinterpret_cast<const Elf64_Shdr*>(data.data() + header()->e_shoff + i * header()->e_shentsize);
  }
  const Elf64_Shdr* find(const char* name) const {
    const char* names = data.data() + section(header()->e_shstrndx)->sh_offset;
    for (int i = 0; i < header()->e_shnum; ++i)
      if (std::strcmp(names + section(i)->sh_name, name) == 0) return section(i);
    return nullptr;
  }
};

Elf loadLibrary() {
  Elf elf{readFile(TRIB_LIBRARY_PATH)};
  EXPECT_GT(elf.data.size(), sizeof(Elf64_Ehdr)) << TRIB_LIBRARY_PATH;
  if (elf.data.size() > sizeof(Elf64_Ehdr)) {
    EXPECT_EQ(std::memcmp(elf.data.data(), ELFMAG, SELFMAG), 0) << TRIB_LIBRARY_PATH << " is not ELF";
  }
  return elf;
}

// DT_NEEDED entries (readelf -d's "Shared library" lines).
std::vector<std::string> neededLibraries(const Elf& elf) {
  std::vector<std::string> out;
  const Elf64_Shdr* dyn = elf.find(".dynamic");
  const Elf64_Shdr* str = elf.find(".dynstr");
  if (!dyn || !str) return out;
  const auto* d = reinterpret_cast<const Elf64_Dyn*>(elf.data.data() + dyn->sh_offset);
  for (size_t i = 0; i < dyn->sh_size / sizeof(Elf64_Dyn) && d[i].d_tag != DT_NULL; ++i)
    if (d[i].d_tag == DT_NEEDED) out.push_back(elf.data.data() + str->sh_offset + d[i].d_un.d_val);
  return out;
}

TEST(LibraryContents, NeedsNoLibcudaNorSharedCudaRuntime) {
  const Elf elf = loadLibrary();
  ASSERT_FALSE(HasFailure());
  const std::vector<std::string> needed = neededLibraries(elf);
  bool libc = false;
  for (const std::string& n : needed) {
    libc |= n.rfind("libc.so", 0) == 0;
    EXPECT_NE(n.rfind("libcuda.so", 0), 0u)
        << "libtributary.so needs " << n << ": the driver must be optional";
    EXPECT_NE(n.rfind("libcudart.so", 0), 0u) << "the CUDA runtime must be linked statically, not " << n;
  }
  EXPECT_TRUE(libc) << "no DT_NEEDED libc.so found: the ELF reading is broken";
}

// The fat binary images (cuobjdump --list-elf / --list-ptx): kind 1 = PTX, 2 = ELF, per arch.
struct Images {
  std::set<int> elf, ptx;
};
Images fatbinImages(const Elf& elf) {
  Images out;
  const Elf64_Shdr* sec = elf.find(".nv_fatbin");
  if (!sec) return out;
  const char* p = elf.data.data() + sec->sh_offset;
  const char* end = p + sec->sh_size;
  while (p + 16 <= end) {
    uint32_t magic;
    uint16_t headerSize;
    uint64_t size;
    std::memcpy(&magic, p, 4);
    if (magic != 0xBA55ED50u) {  // padding between the fat binaries of translation units
      p += 8;
      continue;
    }
    std::memcpy(&headerSize, p + 6, 2);
    std::memcpy(&size, p + 8, 8);
    const char* e = p + headerSize;
    const char* fatEnd = e + size;
    while (e + 32 <= fatEnd && e + 32 <= end) {
      uint16_t kind;
      uint32_t entryHeader, entrySize, arch;  // header size, padded payload size, sm version
      std::memcpy(&kind, e, 2);
      std::memcpy(&entryHeader, e + 4, 4);
      std::memcpy(&entrySize, e + 8, 4);
      std::memcpy(&arch, e + 28, 4);
      (kind == 2 ? out.elf : out.ptx).insert(static_cast<int>(arch));
      if (entryHeader == 0) break;
      e += entryHeader + entrySize;
    }
    p = fatEnd;
  }
  return out;
}

TEST(LibraryContents, CudaBuildCarriesHopperAndBlackwellCode) {
  const Elf elf = loadLibrary();
  ASSERT_FALSE(HasFailure());
  const Images images = fatbinImages(elf);
  if (!cuda::built()) {
    EXPECT_TRUE(images.elf.empty() && images.ptx.empty()) << "a build without CUDA carries device code";
    EXPECT_EQ(elf.find(".nv_fatbin"), nullptr);
    return;
  }
  for (int arch : {90, 100, 103}) EXPECT_TRUE(images.elf.count(arch)) << "no sm_" << arch << " machine code";
  EXPECT_TRUE(images.ptx.count(103)) << "no compute_103 PTX for later chips";
}

}  // namespace
}  // namespace trib
