#include "self_symbols.hpp"

#include <elf.h>
#include <link.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace moekit {
namespace {

// Function symbols of the running executable (its .symtab), by name, and the
// address it was loaded at (PIE).
struct SelfSymbols {
  std::unordered_map<std::string, std::uintptr_t> value;
  std::uintptr_t bias = 0;
  std::string error;
};

int main_program_bias(dl_phdr_info* info, std::size_t, void* out) {
  *static_cast<std::uintptr_t*>(out) = info->dlpi_addr;
  return 1;  // the first object is the executable itself
}

template <class T>
bool read_at(std::ifstream& f, std::uint64_t off, T* out, std::size_t n = 1) {
  f.seekg(static_cast<std::streamoff>(off));
  f.read(reinterpret_cast<char*>(out), static_cast<std::streamsize>(sizeof(T) * n));
  return static_cast<bool>(f);
}

SelfSymbols load_self_symbols() {
  SelfSymbols s;
  std::ifstream f("/proc/self/exe", std::ios::binary);
  Elf64_Ehdr eh{};
  if (!f || !read_at(f, 0, &eh) || std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
      eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_shentsize != sizeof(Elf64_Shdr)) {
    s.error = "cannot read this executable's ELF header";
    return s;
  }
  std::vector<Elf64_Shdr> sh(eh.e_shnum);
  if (!read_at(f, eh.e_shoff, sh.data(), sh.size())) {
    s.error = "cannot read this executable's section headers";
    return s;
  }
  const auto symtab = std::find_if(sh.begin(), sh.end(), [](const Elf64_Shdr& h) { return h.sh_type == SHT_SYMTAB; });
  if (symtab == sh.end() || symtab->sh_link >= sh.size()) {
    s.error = "this executable has no symbol table (stripped?)";
    return s;
  }
  const Elf64_Shdr& strtab = sh[symtab->sh_link];
  std::vector<Elf64_Sym> syms(symtab->sh_size / sizeof(Elf64_Sym));
  std::string names(strtab.sh_size, '\0');
  if (!read_at(f, symtab->sh_offset, syms.data(), syms.size()) || !read_at(f, strtab.sh_offset, names.data(), names.size())) {
    s.error = "cannot read this executable's symbol table";
    return s;
  }
  for (const Elf64_Sym& y : syms)
    if (ELF64_ST_TYPE(y.st_info) == STT_FUNC && y.st_value != 0 && y.st_name < names.size())
      s.value.emplace(names.c_str() + y.st_name, y.st_value);
  dl_iterate_phdr(main_program_bias, &s.bias);
  return s;
}

const SelfSymbols& self_symbols() {
  static std::once_flag once;
  static SelfSymbols s;
  std::call_once(once, [] { s = load_self_symbols(); });
  return s;
}

}  // namespace

const void* self_function(std::string_view symbol, std::string& why) {
  const SelfSymbols& s = self_symbols();
  if (!s.error.empty()) {
    why = s.error;
    return nullptr;
  }
  const auto it = s.value.find(std::string(symbol));
  if (it == s.value.end()) {
    why = "no such function in this executable's symbol table";
    return nullptr;
  }
  return reinterpret_cast<const void*>(s.bias + it->second);
}

std::vector<std::string> host_stub_names(std::string_view mangled) {
  std::vector<std::string> names{std::string(mangled)};
  auto digit = [](char c) { return c >= '0' && c <= '9'; };
  for (std::size_t i = 2; i < mangled.size(); ++i)
    if (digit(mangled[i]) && mangled[i] != '0' && !digit(mangled[i - 1])) {
      std::string n(mangled.substr(0, i));
      n += 'L';
      n += mangled.substr(i);
      names.push_back(std::move(n));
    }
  return names;
}

}  // namespace moekit
