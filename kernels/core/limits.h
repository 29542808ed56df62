// Hard limits on untrusted input (ONNX models, .kiln artifacts, .npy/.npz arrays), in one place.
// Each is checked before anything of that size is allocated or parsed, and the limit_exceeded
// error it gives states the limit. They are far above any real model (ResNet-50: 122 nodes
// after import, largest tensor 2.4 M elements; large language models: ~10^4 nodes), so only
// corrupt or hostile input meets them. Modules may alias these under local names; they must not
// define their own values.
#pragma once

#include <cstddef>
#include <cstdint>

namespace kiln::limits {

// Element count of any one tensor and any one dim (declared, stored or computed from tensor
// values), so that no size arithmetic overflows int64.
inline constexpr int64_t kMaxTensorElements = int64_t{1} << 40;
// Bytes of one stored weight tensor (ONNX initializer or .kiln constant): 64 GiB.
inline constexpr int64_t kMaxTensorBytes = int64_t{1} << 36;
// Bytes of one value the reference executor allocates by default, and of one .npy array: 16 GiB.
inline constexpr int64_t kMaxValueBytes = int64_t{1} << 34;
// Rank of any declared or stored shape (NumPy's own limit is 64).
inline constexpr int64_t kMaxRank = 64;

// Size of a serialized ONNX model without external data: protobuf's own 2 GiB ceiling.
inline constexpr size_t kMaxModelBytes = size_t{2} << 30;
// Nodes in one model (all graphs and functions together) and tensors it declares (initializers,
// inputs, outputs, value infos), counted on the serialized bytes before protobuf parses them:
// a 2 GiB model of empty 2-byte nodes would otherwise become 10^9 parsed messages.
inline constexpr int64_t kMaxGraphNodes = int64_t{1} << 20;
inline constexpr int64_t kMaxGraphValues = int64_t{1} << 22;
// Nesting of protobuf messages (graphs in attributes) and of JSON (.kiln metadata).
inline constexpr int kMaxNestingDepth = 64;
// Length of one name (node, value, attribute, op type) and of one string attribute.
inline constexpr size_t kMaxStringBytes = size_t{1} << 16;

// JSON metadata of one .kiln file (steps, slot types, attributes; weights are separate).
inline constexpr uint64_t kMaxPlanMetadataBytes = uint64_t{1} << 28;
// Header of one .npy array (NumPy's own default limit is 10000 bytes).
inline constexpr uint64_t kMaxNpyHeaderBytes = uint64_t{1} << 20;

}  // namespace kiln::limits
