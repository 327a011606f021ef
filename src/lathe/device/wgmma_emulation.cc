#include "lathe/device/wgmma_emulation.h"

#include <array>
#include <cstring>
#include <vector>

#include "lathe/core/error.h"
#include "lathe/core/half.h"
#include "lathe/device/commit_groups.h"
#include "lathe/device/simt_emulation.h"
#include "lathe/device/wgmma_layout.h"

namespace lathe::wgmma::emulation {
namespace {

constexpr int kLanes = 4 * simt::kWarpSize;      // a warpgroup
constexpr uint32_t kInFlightBits = 0x7fc057a1u;  // a quiet NaN: the accumulator's product has not landed

int running_warpgroup() { return static_cast<int>(simt::current().thread_idx.x) / kLanes; }

// One issued instruction: what it computed for each lane and what it read, to check at its wait
// that nothing it read changed and nothing it will write was touched.
struct Product {
  int floats = 0;  // accumulator floats per lane
  std::array<float*, kLanes> d{};
  std::vector<float> result;  // [lane][floats]
  std::array<const uint32_t*, kLanes> a{};
  std::vector<uint32_t> a_words;  // [lane][4], as issued
  std::vector<uint32_t> shared_addresses;
  std::vector<uint16_t> shared_bits;  // as issued
};

// A warpgroup's products in flight (per block: simt::block_state).
struct Warpgroup : simt::BlockState {
  simt::CommitGroups<Product> products;
  int index = 0;

  void finish() override {
    if (products.in_flight() > 0)
      throw_error("wgmma (emulated): warpgroup ", index, " ended its block with ", products.in_flight(),
                  " products never waited for (wgmma.wait_group)");
  }

  // The latest product in flight that writes lane `lane`'s accumulator `d`, or null.
  const Product* latest_writing(int lane, const float* d) const {
    for (auto product = products.open.rbegin(); product != products.open.rend(); ++product)
      if (product->d[lane] == d) return &*product;
    for (auto group = products.committed.rbegin(); group != products.committed.rend(); ++group)
      for (auto product = group->rbegin(); product != group->rend(); ++product)
        if (product->d[lane] == d) return &*product;
    return nullptr;
  }
};

Warpgroup& state_of(int warpgroup) {
  Warpgroup& state = simt::block_state<Warpgroup>(warpgroup);
  state.index = warpgroup;
  return state;
}

uint16_t shared_bits_at(uint32_t address) {
  uint16_t bits;
  std::memcpy(&bits, simt::shared_at(address, sizeof(bits)), sizeof(bits));
  return bits;
}

float bits_to_float(uint16_t bits) { return float_from_bits(uint32_t{bits} << 16); }

// What the hardware requires of a descriptor lathe builds: the 128-byte swizzle, base offset 0.
void check_descriptor(uint64_t d, const char* operand) {
  LATHE_CHECK(d >> 62 == 1 && ((d >> 49) & 7) == 0, "wgmma (emulated): the ", operand,
              " descriptor is not a 128-byte-swizzled one with base offset 0");
}

struct IssueLane {
  float* d;
  const uint32_t* a;
  uint64_t a_descriptor, b_descriptor;
  int n, mn_major_b, accumulate, warpgroup;
};
struct Nothing {};

// The lanes' fragment coordinates (device/wgmma.cuh): warp w of the group holds rows 16 w + group
// and + 8; an A word `part` the pair at (row + 8 (part % 2), columns 2 quad + 8 (part / 2), + 1);
// an accumulator float 4 j + e the element (row + 8 (e / 2), column 8 j + 2 quad + e % 2).
struct Coordinates {
  int row, quad;
  explicit Coordinates(int lane) : row(lane / simt::kWarpSize * 16 + lane % simt::kWarpSize / 4), quad(lane % 4) {}
};

void multiply(const IssueLane (&lanes)[kLanes], Nothing (&)[kLanes]) {
  const IssueLane& first = lanes[0];
  const bool a_in_registers = first.a != nullptr;
  for (const IssueLane& lane : lanes)
    LATHE_CHECK(lane.n == first.n && lane.mn_major_b == first.mn_major_b && lane.accumulate == first.accumulate &&
                    lane.b_descriptor == first.b_descriptor && (lane.a != nullptr) == a_in_registers &&
                    (a_in_registers || lane.a_descriptor == first.a_descriptor) && lane.warpgroup == first.warpgroup,
                "wgmma (emulated): the lanes of warpgroup ", first.warpgroup, " issued different instructions");
  LATHE_CHECK(first.n == 64 || first.n == 128, "wgmma (emulated): n = ", first.n, " (64 or 128)");
  check_descriptor(first.b_descriptor, "B");
  if (!a_in_registers) check_descriptor(first.a_descriptor, "A");
  const int n = first.n;
  Product product;
  product.floats = n / 2;

  auto read_shared = [&](uint32_t address) {
    const unsigned char* element = simt::shared_at(address, 2);
    simt::note_shared_read(element, 2, simt::kAsyncProxy);
    uint16_t bits;
    std::memcpy(&bits, element, sizeof(bits));
    product.shared_addresses.push_back(address);
    product.shared_bits.push_back(bits);
    return bits_to_float(bits);
  };
  float a[64][kStepDepth];
  if (a_in_registers) {
    product.a_words.resize(kLanes * 4);
    for (int t = 0; t < kLanes; ++t) {
      const Coordinates at(t);
      product.a[t] = lanes[t].a;
      for (int part = 0; part < 4; ++part) {
        const uint32_t word = lanes[t].a[part];
        product.a_words[t * 4 + part] = word;
        const int row = at.row + (part % 2) * 8, column = 2 * at.quad + (part / 2) * 8;
        a[row][column] = bits_to_float(static_cast<uint16_t>(word & 0xffffu));
        a[row][column + 1] = bits_to_float(static_cast<uint16_t>(word >> 16));
      }
    }
  } else {
    for (int m = 0; m < 64; ++m)
      for (int k = 0; k < kStepDepth; ++k) a[m][k] = read_shared(k_major_address(first.a_descriptor, m, k));
  }
  std::vector<float> b(static_cast<size_t>(n) * kStepDepth);  // [n][k]
  for (int column = 0; column < n; ++column)
    for (int k = 0; k < kStepDepth; ++k)
      b[column * kStepDepth + k] = read_shared(first.mn_major_b ? mn_major_address(first.b_descriptor, column, k)
                                                                : k_major_address(first.b_descriptor, column, k));

  Warpgroup& state = state_of(first.warpgroup);
  product.result.resize(static_cast<size_t>(kLanes) * product.floats);
  for (int t = 0; t < kLanes; ++t) {
    const Coordinates at(t);
    product.d[t] = lanes[t].d;
    // The accumulator as the warpgroup's earlier products in flight leave it (they run in order).
    const Product* earlier = first.accumulate ? state.latest_writing(t, lanes[t].d) : nullptr;
    for (int i = 0; i < product.floats; ++i) {
      const int j = i / 4, e = i % 4;
      const int row = at.row + (e / 2) * 8, column = 8 * j + 2 * at.quad + e % 2;
      float sum = !first.accumulate    ? 0.0f
                  : earlier != nullptr ? earlier->result[static_cast<size_t>(t) * product.floats + i]
                                       : lanes[t].d[i];
      for (int k = 0; k < kStepDepth; ++k) sum += a[row][k] * b[column * kStepDepth + k];
      product.result[static_cast<size_t>(t) * product.floats + i] = sum;
    }
  }
  const float marker = float_from_bits(kInFlightBits);
  for (int t = 0; t < kLanes; ++t)
    for (int i = 0; i < product.floats; ++i) lanes[t].d[i] = marker;
  state.products.open.push_back(std::move(product));
}

// The product's operands as issued and its accumulators untouched since.
void check_untouched(const Product& product, const Warpgroup& state) {
  for (size_t i = 0; i < product.shared_addresses.size(); ++i)
    LATHE_CHECK(shared_bits_at(product.shared_addresses[i]) == product.shared_bits[i], "wgmma (emulated): warpgroup ",
                state.index, ": shared memory at byte ", product.shared_addresses[i],
                ", an operand of a product in flight, changed before the wait that completes it");
  for (int t = 0; t < kLanes && !product.a_words.empty(); ++t)
    for (int part = 0; part < 4; ++part)
      LATHE_CHECK(product.a[t][part] == product.a_words[static_cast<size_t>(t) * 4 + part],
                  "wgmma (emulated): warpgroup ", state.index, ", lane ", t,
                  ": an A register of a product in flight changed before the wait that completes it");
  for (int t = 0; t < kLanes; ++t)
    for (int i = 0; i < product.floats; ++i)
      LATHE_CHECK(float_bits(product.d[t][i]) == kInFlightBits, "wgmma (emulated): warpgroup ", state.index, ", lane ",
                  t, ": an accumulator of a product in flight was written before the wait that completes it");
}

// The product's results land, in each lane's accumulator that no product still in flight writes.
void land(const Product& product, const Warpgroup& state) {
  for (int t = 0; t < kLanes; ++t) {
    if (state.latest_writing(t, product.d[t]) != nullptr) continue;  // a later product's result lands there
    std::memcpy(product.d[t], &product.result[static_cast<size_t>(t) * product.floats], sizeof(float) * product.floats);
  }
}

struct GroupLane {
  int warpgroup, pending;
};

void check_uniform(const GroupLane (&lanes)[kLanes], const char* instruction) {
  for (const GroupLane& lane : lanes)
    LATHE_CHECK(lane.warpgroup == lanes[0].warpgroup && lane.pending == lanes[0].pending,
                "wgmma (emulated): the lanes of warpgroup ", lanes[0].warpgroup, " ran ", instruction,
                " with different operands");
}

}  // namespace

void issue(int n, bool mn_major_b, float* d, const uint32_t* a, uint64_t a_descriptor, uint64_t b_descriptor,
           bool accumulate) {
  simt::group_collective<4, IssueLane, Nothing>(
      {d, a, a_descriptor, b_descriptor, n, mn_major_b ? 1 : 0, accumulate ? 1 : 0, running_warpgroup()}, multiply);
}

void commit() {
  simt::group_collective<4, GroupLane, Nothing>({running_warpgroup(), 0},
                                                [](const GroupLane(&lanes)[kLanes], Nothing(&)[kLanes]) {
                                                  check_uniform(lanes, "wgmma.commit_group");
                                                  state_of(lanes[0].warpgroup).products.commit();
                                                });
}

void wait(int pending) {
  simt::group_collective<4, GroupLane, Nothing>(
      {running_warpgroup(), pending}, [](const GroupLane(&lanes)[kLanes], Nothing(&)[kLanes]) {
        check_uniform(lanes, "wgmma.wait_group");
        Warpgroup& state = state_of(lanes[0].warpgroup);
        state.products.wait(lanes[0].pending, [&](const std::vector<Product>& group) {
          for (const Product& product : group) check_untouched(product, state);
          for (const Product& product : group) land(product, state);  // in issue order: the last one's stays
        });
      });
}

}  // namespace lathe::wgmma::emulation
