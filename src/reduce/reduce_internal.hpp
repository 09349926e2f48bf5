// Internals of the reducer that tests and benchmarks reach: choosing the instruction set.
#pragma once
#include <string>
#include <vector>

namespace trib {

// Every instruction set this build and CPU can run, lowest first: "scalar", then "avx2", "avx512".
std::vector<std::string> reduceAvailableIsas();

// Makes every later reduce()/avgFinalize() use `isa` ("scalar", "avx2", "avx512"); returns false
// and changes nothing when the name is unknown or this CPU cannot run it.
bool reduceForceIsa(const char* isa);

}  // namespace trib
