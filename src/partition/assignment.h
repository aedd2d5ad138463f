// partition/assignment.h: the assignment problem (Hungarian algorithm) and balanced placements.
//
// solve_assignment() gives each row of a cost matrix a distinct column, minimising the total cost,
// exactly: the Hungarian method in its shortest-augmenting-path form with row and column
// potentials, O(rows^2 x columns) time, O(rows + columns) memory besides the matrix. Hand-written
// (about 60 lines) because Debian's candidates do not fit: dlib's max_cost_assignment wants
// integer costs (floating point may not terminate, its documentation says) and LEMON has no
// assignment solver, only min-cost flows on integer capacities; checked against brute force in
// tests/partition/assignment_test.cpp.
//
// balanced_assignment() places n units on K workers, each worker taking floor(n/K) or ceil(n/K)
// of them, at the least total cost of unit-on-worker costs: one column per worker slot.
// Deterministic: ties go to the lowest column in scan order.
#pragma once

#include <cstdint>
#include <vector>

#include "partition/model.h"

namespace orrery::partition {

// cost: rows x columns with rows <= columns, every entry finite. Returns the column of each row.
std::vector<int64_t> solve_assignment(const Matrix& cost);

// cost: units x workers. Returns the worker of each unit; every worker gets floor(units/workers)
// or that plus one.
std::vector<int32_t> balanced_assignment(const Matrix& cost);

// The contiguous placement: units [k*n/K, (k+1)*n/K) on worker k (sizes as balanced_assignment).
std::vector<int32_t> contiguous_placement(int64_t units, int32_t workers);

// How many units each worker of a placement holds.
std::vector<int64_t> worker_sizes(const std::vector<int32_t>& placement, int32_t workers);

}  // namespace orrery::partition
