// The device allocator's accounting, on host memory.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <map>
#include <set>

#include "../error_text.hpp"
#include "executor/cuda/host/block_pool.hpp"

using namespace pw;

namespace {

// malloc with a budget, counting what is outstanding.
struct FakeDevice {
  std::size_t budget = 1 << 20;
  std::size_t used = 0;
  std::set<void*> live;
  long frees = 0;

  BlockPool pool() {
    return BlockPool(
        [this](std::size_t n) -> void* {
          if (used + n > budget) return nullptr;
          used += n;
          void* p = std::malloc(n);
          live.insert(p);
          sizes[p] = n;
          return p;
        },
        [this](void* p) {
          used -= sizes.at(p);
          live.erase(p);
          ++frees;
          std::free(p);
        });
  }
  std::map<void*, std::size_t> sizes;
};

}  // namespace

TEST_CASE("blocks are rounded to 512 bytes and counted while in use", "[cuda][host]") {
  CHECK(BlockPool::rounded(1) == 512);
  CHECK(BlockPool::rounded(512) == 512);
  CHECK(BlockPool::rounded(513) == 1024);
  FakeDevice dev;
  {
    BlockPool pool = dev.pool();
    CHECK(pool.allocate(0) == nullptr);
    void* a = pool.allocate(1000);  // 1024
    void* b = pool.allocate(3000);  // 3072
    CHECK(pool.in_use() == 4096);
    CHECK(pool.peak() == 4096);
    pool.release(a);
    CHECK(pool.in_use() == 3072);
    CHECK(pool.peak() == 4096);  // the high-water mark stays
    CHECK(pool.reserved() == 4096);
    CHECK(pool.cached() == 1024);
    pool.reset_peak();
    CHECK(pool.peak() == 3072);
    pool.release(b);
    pool.release(nullptr);
    CHECK(pool.in_use() == 0);
  }
  // Destroying the pool gives every block back.
  CHECK(dev.live.empty());
}

TEST_CASE("a released block is reused for the same rounded size without a new raw allocation", "[cuda][host]") {
  FakeDevice dev;
  BlockPool pool = dev.pool();
  void* a = pool.allocate(700);
  pool.release(a);
  void* b = pool.allocate(1000);  // rounds to 1024 as 700 did
  CHECK(b == a);
  CHECK(pool.raw_allocations() == 1);
  void* c = pool.allocate(2000);  // another size: a new block
  CHECK(c != a);
  CHECK(pool.raw_allocations() == 2);
  pool.release(b);
  pool.release(c);
  pool.trim();
  CHECK(pool.reserved() == 0);
  CHECK(dev.frees == 2);
}

TEST_CASE("out of memory: the cache goes back to the device and the allocation is tried again", "[cuda][host]") {
  FakeDevice dev;
  dev.budget = 4096;
  BlockPool pool = dev.pool();
  void* a = pool.allocate(3000);  // 3072 of the 4096
  pool.release(a);                // cached, still held from the device
  void* b = pool.allocate(2048);  // needs the cached 3072 back first
  CHECK(b != nullptr);
  CHECK(pool.reserved() == 2048);
  CHECK(bad_input([&] { pool.allocate(4096); }) ==
        "runtime error: out of device memory: 4.10 kB requested with 2.05 kB in use and 2.05 kB reserved");
  CHECK(bad_input([&] {
          int x = 0;
          pool.release(&x);
        }) == "runtime error: device memory: released a block this pool did not allocate");
  pool.release(b);
}
