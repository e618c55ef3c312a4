#pragma once
// Numbers as text, for traces and messages: the shortest form that reads back to the same double
// ("0.35355339059327373", "0.125", "1e-06"); for a float, the shortest float form ("0.4082483").
#include <string>

namespace attntrace {

std::string format_number(double value);
std::string format_number(float value);  // shortest form that reads back to the same float

}  // namespace attntrace
