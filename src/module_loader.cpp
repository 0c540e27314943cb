#include "module_loader.h"

#include <dlfcn.h>
#include <link.h>

#include <cstdint>
#include <cstdlib>
#include <vector>

namespace oneflow {
namespace {

std::string dl_error() {
  const char* e = dlerror();
  return e ? e : "unknown dlopen error";
}

// The folder liboneflow.so was loaded from ("" when it cannot be told).
std::string core_dir() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<const void*>(&core_dir), &info) == 0 || !info.dli_fname) return {};
  const std::string path = info.dli_fname;
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? std::string() : path.substr(0, slash);
}

}  // namespace

bool core_linked_statically() {
  // dl_iterate_phdr reports the executable first: is this function inside one of its segments?
  struct Probe {
    uintptr_t address;
    bool inside = false;
  } probe{reinterpret_cast<uintptr_t>(&core_linked_statically)};
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        auto* p = static_cast<Probe*>(data);
        for (int i = 0; i < info->dlpi_phnum; ++i) {
          const ElfW(Phdr)& seg = info->dlpi_phdr[i];
          const uintptr_t begin = info->dlpi_addr + seg.p_vaddr;
          if (seg.p_type == PT_LOAD && p->address >= begin && p->address < begin + seg.p_memsz)
            p->inside = true;
        }
        return 1;  // the executable only
      },
      &probe);
  return probe.inside;
}

void* load_core_module(const char* env_var, const char* file, std::string* why) {
  // NOTE [Static core]: a module links liboneflow.so; loading it into a program that carries
  // the core itself (liboneflow.a) would start a second core with its own op table, allocator
  // and tensors, which the program's tensors must never meet.
  if (core_linked_statically()) {
    *why = "this program links oneflow statically (liboneflow.a), and " + std::string(file) +
           " needs the shared core: link liboneflow.so (pkg-config --libs oneflow) to use it";
    return nullptr;
  }
  std::vector<std::string> candidates;
  if (const char* env = std::getenv(env_var)) {
    const std::string e = env;
    if (e.empty() || e == "none") {
      *why = "disabled by " + std::string(env_var) + "=" + e;
      return nullptr;
    }
    candidates.push_back(e);
  } else {
    if (std::string dir = core_dir(); !dir.empty()) candidates.push_back(dir + "/" + file);
    candidates.push_back(file);
  }
  std::string errors;
  for (const std::string& c : candidates) {
    // RTLD_LOCAL: the backend libraries' symbols stay out of the global namespace.
    if (void* handle = dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL)) return handle;
    errors += (errors.empty() ? "" : "; ") + dl_error();
  }
  *why = "cannot load the module " + std::string(file) + ": " + errors;
  return nullptr;
}

void* module_symbol(void* handle, const char* symbol, std::string* why) {
  void* p = dlsym(handle, symbol);
  if (!p) *why = "the module has no " + std::string(symbol) + ": " + dl_error();
  return p;
}

}  // namespace oneflow
