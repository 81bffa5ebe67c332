#include "executor/cuda/cublas_library.hpp"

#include <dlfcn.h>

#include <atomic>
#include <string>

#include "core/error.hpp"

#define PW_CUBLAS_TEXT(x) #x
// Expands the argument first, so that a name cublas_v2.h maps gives its _v2 symbol.
#define PW_CUBLAS_SYMBOL(x) PW_CUBLAS_TEXT(x)
#define PW_CUBLAS_SONAME(name) "lib" name ".so." PW_CUBLAS_SYMBOL(CUBLAS_VER_MAJOR)

namespace pw::cuda {

const char* cublas_soname() { return PW_CUBLAS_SONAME("cublas"); }
const char* cublaslt_soname() { return PW_CUBLAS_SONAME("cublasLt"); }

namespace {

std::atomic<bool> opened{false};

void* open_library(const char* soname) {
  if (void* handle = dlopen(soname, RTLD_NOW | RTLD_LOCAL)) return handle;
  const std::string first = dlerror();
#ifdef PIPEWRIGHT_CUDA_LIBRARY_DIR
  const std::string path = std::string(PIPEWRIGHT_CUDA_LIBRARY_DIR) + "/" + soname;
  if (void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL)) return handle;
#endif
  throw_runtime("cuBLAS: cannot open {} ({}); install the CUDA toolkit's cuBLAS or add its directory to "
                "LD_LIBRARY_PATH",
                soname, first);
}

template <typename Function>
void find(void* handle, const char* soname, const char* symbol, Function& out) {
  void* address = dlsym(handle, symbol);
  if (!address) throw_runtime("cuBLAS: {} has no {}; it is older than the headers pipewright was built with", soname, symbol);
  out = reinterpret_cast<Function>(address);
}

CublasLibrary load() {
  CublasLibrary lib;
  void* lt = open_library(cublaslt_soname());
  void* blas = open_library(cublas_soname());
#define PW_CUBLASLT_FIND(name) find(lt, cublaslt_soname(), PW_CUBLAS_SYMBOL(name), lib.name);
#define PW_CUBLAS_FIND(name) find(blas, cublas_soname(), PW_CUBLAS_SYMBOL(name), lib.name);
  PW_CUBLASLT_FUNCTIONS(PW_CUBLASLT_FIND)
  PW_CUBLAS_FUNCTIONS(PW_CUBLAS_FIND)
  PW_CUBLAS_FIND(cublasGemmStridedBatchedEx)
#undef PW_CUBLASLT_FIND
#undef PW_CUBLAS_FIND
  opened = true;
  return lib;
}

}  // namespace

const CublasLibrary& cublas() {
  // The handles stay open for the process: the functions are called until exit.
  static const CublasLibrary lib = load();
  return lib;
}

bool cublas_opened() { return opened; }

}  // namespace pw::cuda
