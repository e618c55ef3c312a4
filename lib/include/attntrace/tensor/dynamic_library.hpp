#pragma once
// Shared libraries loaded at run time (dlopen) rather than linked: the dependencies only some runs
// need (OpenBLAS in gemm.cpp, cairo + pango in pictures/canvas.cpp, zlib in pictures/zlib.cpp,
// PCRE2 and utf8proc in text/unicode.cpp), which linked would cost every start.
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

// A table of a library's functions, each named once. SYMBOLS(X) lists them as X(name); the table's
// field NAME points to the function of that name:
//   #define PNG_SYMBOLS(X) X(png_create_write_struct) X(png_write_row)
//   struct LibPng { ATTNTRACE_SYMBOL_FIELDS(PNG_SYMBOLS) };
//   const std::string missing = ATTNTRACE_BIND_SYMBOLS(PNG_SYMBOLS, handle, lib);  // "" when all bound
#define ATTNTRACE_SYMBOL_FIELD(name) decltype(&::name) name = nullptr;
#define ATTNTRACE_SYMBOL_FIELDS(SYMBOLS) SYMBOLS(ATTNTRACE_SYMBOL_FIELD)
#define ATTNTRACE_BIND_SYMBOL(name)                                                                       \
    attntrace_table_.name = reinterpret_cast<decltype(attntrace_table_.name)>(dlsym(attntrace_handle_, #name)); \
    if (!attntrace_table_.name && attntrace_missing_.empty()) attntrace_missing_ = #name;
// Binds every field of TABLE from HANDLE; the name of the first symbol the library lacks, or "".
#define ATTNTRACE_BIND_SYMBOLS(SYMBOLS, handle, table)                                                   \
    [&] {                                                                                               \
        void* const attntrace_handle_ = (handle);                                                       \
        auto& attntrace_table_ = (table);                                                               \
        std::string attntrace_missing_;                                                                 \
        SYMBOLS(ATTNTRACE_BIND_SYMBOL)                                                                  \
        return attntrace_missing_;                                                                      \
    }()
