// module_loader.h (internal): finds and dlopen's a backend module of the core (the CUDA
// backend, the MPI communicator). Where it looks, in order: $<env_var> when set (a path; ""
// or "none" disables the module), beside liboneflow.so (the build folder or the installed
// libdir), then the loader's search path.
#pragma once
#include <string>

namespace oneflow {

// Whether the core is part of the executable (linked from liboneflow.a) rather than loaded as
// liboneflow.so: modules are then refused (NOTE [Static core], module_loader.cpp).
bool core_linked_statically();
// The handle (never dlclose'd), or null with `why` saying what was tried.
void* load_core_module(const char* env_var, const char* file, std::string* why);
// dlsym with the loader's message on failure.
void* module_symbol(void* handle, const char* symbol, std::string* why);

}  // namespace oneflow
