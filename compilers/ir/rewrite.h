// Small graph-editing helpers shared by the passes.
#pragma once

#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

#include "compilers/ir/graph.h"

namespace kiln {

// For each value, the indices of the nodes that read it (a node reading twice appears twice).
std::vector<std::vector<int>> graph_consumers(const Graph& graph);

// True when the value is a graph output.
bool graph_is_output(const Graph& graph, ValueId id);

// A Concat node's axis in [0, rank) of its output; nothing when the node is not a Concat with one output
// of known rank, or its axis is invalid.
std::optional<int64_t> graph_concat_axis(const Graph& graph, const Node& n);

// Makes every reader of `from` (nodes and graph outputs) read `to` instead.
void graph_replace_uses(Graph& graph, ValueId from, ValueId to);

// Removes the nodes whose flag is set, keeping the order of the rest, and fixes producers.
void graph_remove_nodes(Graph& graph, const std::vector<bool>& remove);

// Adds an initializer under a fresh name derived from `hint`.
ValueId graph_add_initializer(Graph& graph, const std::string& hint, Tensor value);

// Drops initializers that no node reads and that are not graph outputs; with `candidates`, only
// those among them (a pass that replaced some weights drops just those).
int graph_drop_unused_initializers(Graph& graph, const std::unordered_set<ValueId>* candidates = nullptr);

// Removes the initializers and Constant nodes among `candidates` (the inputs of nodes a pass
// removed) that nothing reads any more and that are not graph inputs or outputs.
void graph_drop_orphaned_constants(Graph& graph, const std::vector<ValueId>& candidates);

// The value of `v` when it is a constant: an initializer that is not also a graph input (those
// can be overridden), or the output of a Constant node with a tensor `value`.
std::optional<Tensor> graph_constant_value(const Graph& graph, ValueId v);

}  // namespace kiln
