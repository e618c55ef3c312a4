#pragma once
// Numbers as text, for traces and messages: the shortest form that reads back to the same double
// ("0.35355339059327373", "0.125", "1e-06").
#include <string>

namespace attntrace {

std::string format_number(double value);

}  // namespace attntrace
