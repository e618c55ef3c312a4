#pragma once
// Shared libraries loaded at run time (dlopen) rather than linked: the dependencies only some runs
// need (OpenBLAS in gemm.cpp, libpng in plot.cpp), which linked would cost every start.
#include <dlfcn.h>

#include <string>

namespace attntrace {

// The library by its SONAME, as the dynamic linker would resolve it (so Debian's alternatives
// choose the variant), else the file PATH found at build time; nullptr when neither loads
// (dlerror() says why).
inline void* open_library(const char* soname, const char* path) {
    void* handle = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
    return handle ? handle : dlopen(path, RTLD_NOW | RTLD_LOCAL);
}

// FN := the function NAME of HANDLE (the library WHAT); throws Error("WHAT has no symbol NAME").
template <class Error, class F>
void bind_symbol(void* handle, F& fn, const char* name, const std::string& what) {
    fn = reinterpret_cast<F>(dlsym(handle, name));
    if (!fn) throw Error(what + " has no symbol " + name);
}

}  // namespace attntrace
