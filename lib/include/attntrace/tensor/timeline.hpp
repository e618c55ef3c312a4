#pragma once
// A timeline of one run's phases, thread by thread, for finding the parts that run on one core
// (docs/performance.md). Off unless enabled (app/main.cpp: ATTNTRACE_TIMELINE=1 prints it on
// stderr at exit); a mark costs one relaxed load when off.
#include <string>

namespace attntrace {

void enable_timeline();
// Records WHAT (a string literal) at this moment on this thread.
void timeline_mark(const char* what);
// One line a mark: milliseconds since enable_timeline(), the thread (0: the first to mark), WHAT.
std::string timeline_text();

}  // namespace attntrace
