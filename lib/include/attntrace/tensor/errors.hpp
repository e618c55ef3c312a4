#pragma once
// Typed errors. lib/ throws them; app/main.cpp is the only place that turns them into exit codes:
//   UsageError  -> 2  (a flag value that makes no sense, e.g. --shape 2,x)
//   InputError  -> 3  (unreadable, malformed or inconsistent files; ShapeError is one of these)
//   OutputError -> 4  (cannot write the output)
// A message names the file or flag first, then what is wrong: "key.npy: shape (2, 7, 8) but query
// has batch 3". main prints it as "attntrace: error: <message>".
#include <stdexcept>
#include <string>

namespace attntrace {

struct Error : std::runtime_error {
    using std::runtime_error::runtime_error;
};
struct UsageError : Error {
    using Error::Error;
};
struct InputError : Error {
    using Error::Error;
};
struct ShapeError : InputError {
    using InputError::InputError;
};
struct OutputError : Error {
    using Error::Error;
};

enum ExitCode : int {
    exit_ok = 0,
    exit_differs = 1,
    exit_usage = 2,
    exit_input = 3,
    exit_output = 4,
};

}  // namespace attntrace
