// cuBLAS is opened when the CUDA backend first calls it, not when pipewright starts (its static initialisers
// cost every command 0.4 s); no GPU is needed to open it.
#include <catch2/catch.hpp>

#ifdef PIPEWRIGHT_HAVE_CUDA
#include <dlfcn.h>

#include <string>

#include "executor/cuda/cublas_library.hpp"

using namespace pw::cuda;

namespace {
bool loaded(const char* soname) {
  void* handle = dlopen(soname, RTLD_NOW | RTLD_NOLOAD);
  if (handle) dlclose(handle);  // NOLOAD took a reference
  return handle != nullptr;
}
}  // namespace

TEST_CASE("cuBLAS is not loaded with the program, only by its first call", "[cuda][host]") {
  // ctest runs each case in a process of its own; a whole-binary run may have opened it in an earlier case.
  if (!cublas_opened()) {
    CHECK_FALSE(loaded(cublaslt_soname()));
    CHECK_FALSE(loaded(cublas_soname()));
  }
  const CublasLibrary& lib = cublas();
  CHECK(cublas_opened());
  CHECK(loaded(cublaslt_soname()));
  CHECK(loaded(cublas_soname()));
  CHECK(&cublas() == &lib);
}

TEST_CASE("every cuBLAS function the backend calls is found, by its exported name", "[cuda][host]") {
  CHECK(std::string(cublas_soname()) == "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR));
  CHECK(std::string(cublaslt_soname()) == "libcublasLt.so." + std::to_string(CUBLAS_VER_MAJOR));
  const CublasLibrary& lib = cublas();
#define PW_FOUND(name) CHECK(lib.name != nullptr);
  PW_CUBLAS_FUNCTIONS(PW_FOUND)
  PW_CUBLASLT_FUNCTIONS(PW_FOUND)
#undef PW_FOUND
  CHECK(lib.cublasGemmStridedBatchedEx != nullptr);
  // cublasCreate is cublasCreate_v2 in cublas_v2.h: the member holds the _v2 symbol.
  void* handle = dlopen(cublas_soname(), RTLD_NOW | RTLD_NOLOAD);
  REQUIRE(handle != nullptr);
  CHECK(reinterpret_cast<void*>(lib.cublasCreate) == dlsym(handle, "cublasCreate_v2"));
  dlclose(handle);
  // Callable without a GPU: the status names the error messages quote.
  CHECK(std::string(lib.cublasGetStatusName(CUBLAS_STATUS_NOT_SUPPORTED)) == "CUBLAS_STATUS_NOT_SUPPORTED");
}
#endif
