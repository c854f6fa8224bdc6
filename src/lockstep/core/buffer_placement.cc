// Two arguments: "arenas" (ints: device type, device id, bytes per arena) and "placed_blobs" (strings: the
// blobs; ints: arena, offset, bytes per blob).
#include "lockstep/core/buffer_placement.h"

#include <cstdlib>

#include "lockstep/core/device_backend.h"
#include "lockstep/core/enforce.h"
#include "lockstep/core/workspace.h"

namespace lockstep {
namespace {

constexpr char kArenas[] = "arenas";
constexpr char kPlacedBlobs[] = "placed_blobs";

const Argument* Find(const NetDef& net, const char* name) {
  for (const auto& arg : net.arg())
    if (arg.name() == name) return &arg;
  return nullptr;
}

std::shared_ptr<uint8_t> AllocateArena(const Arena& arena) {
  if (arena.device.type != DeviceType::kCpu)
    return GetDeviceBackend(arena.device.type).Allocate(arena.device.id, arena.bytes);
  void* memory = std::aligned_alloc(64, (arena.bytes + 63) / 64 * 64);
  LOCKSTEP_ENFORCE(memory != nullptr, "out of memory allocating the {}-byte buffer of the memory plan",
                   arena.bytes);
  return std::shared_ptr<uint8_t>(static_cast<uint8_t*>(memory), std::free);
}

}  // namespace

bool IsBufferPlacementArgument(const Argument& arg) {
  return arg.name() == kArenas || arg.name() == kPlacedBlobs;
}

void WriteBufferPlacement(NetDef* net, const std::vector<Arena>& arenas,
                          const std::vector<BufferPlacement>& placements) {
  auto* args = net->mutable_arg();
  for (int i = args->size() - 1; i >= 0; --i)
    if (IsBufferPlacementArgument(args->Get(i))) args->DeleteSubrange(i, 1);
  if (arenas.empty()) return;
  Argument* arena_arg = net->add_arg();
  arena_arg->set_name(kArenas);
  for (const auto& arena : arenas) {
    arena_arg->add_ints(static_cast<int64_t>(arena.device.type));
    arena_arg->add_ints(arena.device.id);
    arena_arg->add_ints(static_cast<int64_t>(arena.bytes));
  }
  Argument* placed = net->add_arg();
  placed->set_name(kPlacedBlobs);
  for (const auto& p : placements) {
    placed->add_strings(p.blob);
    placed->add_ints(p.arena);
    placed->add_ints(static_cast<int64_t>(p.offset));
    placed->add_ints(static_cast<int64_t>(p.bytes));
  }
}

std::vector<Arena> ReadArenas(const NetDef& net) {
  std::vector<Arena> arenas;
  const Argument* arg = Find(net, kArenas);
  if (!arg) return arenas;
  LOCKSTEP_ENFORCE(arg->ints_size() % 3 == 0, "net '{}': argument {} needs 3 ints per arena", net.name(),
                   kArenas);
  for (int i = 0; i < arg->ints_size(); i += 3)
    arenas.push_back({{static_cast<DeviceType>(arg->ints(i)), static_cast<int>(arg->ints(i + 1))},
                      static_cast<size_t>(arg->ints(i + 2))});
  return arenas;
}

std::vector<BufferPlacement> ReadBufferPlacements(const NetDef& net) {
  std::vector<BufferPlacement> placements;
  const Argument* arg = Find(net, kPlacedBlobs);
  if (!arg) return placements;
  LOCKSTEP_ENFORCE(arg->ints_size() == 3 * arg->strings_size(), "net '{}': argument {} needs 3 ints per blob",
                   net.name(), kPlacedBlobs);
  for (int i = 0; i < arg->strings_size(); ++i)
    placements.push_back({arg->strings(i), static_cast<int>(arg->ints(3 * i)),
                          static_cast<size_t>(arg->ints(3 * i + 1)),
                          static_cast<size_t>(arg->ints(3 * i + 2))});
  return placements;
}

void ApplyBufferPlacement(const NetDef& net, Workspace* ws) {
  const std::vector<Arena> arenas = ReadArenas(net);
  if (arenas.empty()) return;
  std::vector<std::shared_ptr<uint8_t>> buffers;
  for (const auto& arena : arenas) buffers.push_back(AllocateArena(arena));
  for (const auto& p : ReadBufferPlacements(net)) {
    LOCKSTEP_ENFORCE(p.arena >= 0 && p.arena < static_cast<int>(arenas.size()) &&
                         p.offset + p.bytes <= arenas[p.arena].bytes,
                     "net '{}': blob '{}' is placed outside its arena", net.name(), p.blob);
    Tensor* blob = ws->CreateBlob(p.blob);
    blob->PlaceOn(arenas[p.arena].device);
    blob->ShareStorage(buffers[p.arena], p.offset, p.bytes);
  }
}

}  // namespace lockstep
