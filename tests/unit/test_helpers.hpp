#pragma once
// What the unit tests share: a temporary directory, whole files read and written, the message of
// a thrown error, exact array comparison, and running the Python reference (/usr/bin/python3,
// the one with numpy and torch).
#include <doctest/doctest.h>

#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <iterator>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <stdlib.h>  // mkdtemp

#include "attntrace/tensor/tensor.hpp"

namespace attntrace::testing {

// A temporary directory, removed with everything in it.
struct TempDir {
    std::filesystem::path path;
    TempDir() {
        std::string pattern = (std::filesystem::temp_directory_path() / "attntrace_test_XXXXXX").string();
        REQUIRE(mkdtemp(pattern.data()) != nullptr);
        path = pattern;
    }
    ~TempDir() {
        std::error_code ignored;
        std::filesystem::remove_all(path, ignored);
    }
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;

    // The path of NAME in the directory, as a string: dir / "x.npy".
    std::string operator/(const std::string& name) const { return (path / name).string(); }
};

// Every byte of PATH; fails the test when it cannot be opened.
inline std::string read_file(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    REQUIRE_MESSAGE(in, "cannot open " << path);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Writes BYTES as PATH (created or truncated); fails the test when it cannot.
inline void write_file(const std::filesystem::path& path, std::string_view bytes) {
    std::ofstream out(path, std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    REQUIRE_MESSAGE(out, "cannot write " << path);
}

// The message of the Error that F throws ("" when it throws nothing).
template <class Error = std::exception, class F>
std::string error_of(F&& f) {
    try {
        std::forward<F>(f)();
    } catch (const Error& error) {
        return error.what();
    }
    return "";
}

using attntrace::shape_of;

// Exact equality of shape and every value (NaN never equals), reporting the first difference.
template <class T>
void check_equal(const Array<T>& actual, const Array<T>& expected, const std::string& what) {
    INFO(what << ": " << shape_string(actual.shape()) << " vs " << shape_string(expected.shape()));
    REQUIRE(shape_of(actual) == shape_of(expected));
    std::size_t differ = 0, first = 0;
    for (std::size_t i = 0; i < expected.size(); ++i) {
        if (actual.data()[i] != expected.data()[i] && differ++ == 0) first = i;
    }
    INFO(differ << " values differ, first at flat index " << first);
    CHECK(differ == 0);
}

// A text and the shape ("(2, 3)") numpy gives the tensor it holds.
struct TextShape {
    const char* text;
    const char* shape;
};

// Checks that PARSE (text -> Array) gives each case its shape.
template <class Parse>
void check_shapes(Parse&& parse, std::initializer_list<TextShape> cases) {
    for (const TextShape& c : cases) {
        CAPTURE(c.text);
        CHECK(shape_string(parse(c.text).shape()) == c.shape);
    }
}

// ---- the Python reference ------------------------------------------------------------------------

inline const std::filesystem::path python = "/usr/bin/python3";

// WORD quoted for sh: 'it'\''s'.
inline std::string shell_quote(const std::string& word) {
    std::string out = "'";
    for (char ch : word) out += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
    return out + "'";
}

// The shell command /usr/bin/python3 ARGS... (each one quoted), REDIRECT (" 2>/dev/null") appended
// as it is.
inline std::string python_command(const std::vector<std::string>& args, const std::string& redirect = "") {
    std::string command = python.string();
    for (const std::string& arg : args) command += " " + shell_quote(arg);
    return command + redirect;
}

// The exit status of python_command(ARGS, REDIRECT): 0 when the script succeeded.
inline int run_python(const std::vector<std::string>& args, const std::string& redirect = "") {
    return std::system(python_command(args, redirect).c_str());
}

inline bool torch_available() {
    return run_python({"-c", "import torch, numpy"}, " >/dev/null 2>&1") == 0;
}

}  // namespace attntrace::testing
