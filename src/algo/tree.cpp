// Double binary tree all-reduce, as in NCCL: two binary trees over the same ranks in which
// (nearly) every rank is a leaf in one and an inner node in the other, so both directions of
// every link carry data. Each tree reduces half of the buffer up to its root and broadcasts the
// result back down, slice by slice. The trees are two channels (Step::channel), as in NCCL.
#include "algo/algo_util.hpp"
#include "algo/algorithms.hpp"

namespace trib::algo {
namespace {

struct TreeNode {
  int parent = -1;
  int child[2] = {-1, -1};
};

// The first tree: rank 0 is the root with one child; below it an in-order binary tree in which
// a rank whose lowest set bit is b has children rank -/+ b/2 (NCCL's ncclGetBtree).
TreeNode btree(int n, int r) {
  TreeNode t;
  int64_t bit = 1;
  while (bit < n && !(bit & r)) bit <<= 1;
  if (r == 0) {
    if (n > 1) t.child[1] = static_cast<int>(bit >> 1);
    return t;
  }
  int64_t up = (r ^ bit) | (bit << 1);
  if (up >= n) up = r ^ bit;
  t.parent = static_cast<int>(up);
  int64_t low = bit >> 1;
  if (low) t.child[0] = static_cast<int>(r - low);
  while (low && r + low >= n) low >>= 1;
  if (low) t.child[1] = static_cast<int>(r + low);
  return t;
}

// The second tree: the first one mirrored (even n) or shifted by one rank (odd n).
TreeNode dtree(int n, int r) {
  const bool mirror = n % 2 == 0;
  auto map = [&](int x) { return x < 0 ? -1 : mirror ? n - 1 - x : mod(x + 1, n); };
  TreeNode t = btree(n, mirror ? n - 1 - r : mod(r - 1, n));
  t.parent = map(t.parent);
  t.child[0] = map(t.child[0]);
  t.child[1] = map(t.child[1]);
  return t;
}

Generator<Step> treeAllReduce(CollArgs a, int rank) {
  const int n = a.nranks;
  if (n == 1) {
    TRIB_YIELD_ALL(localCopy(a, rank));
    co_return;
  }
  const TreeNode trees[2] = {btree(n, rank), dtree(n, rank)};
  const uint64_t chunk = chunkOf(a);
  const uint64_t begin[2] = {blockBegin(a.count, 2, 0), blockBegin(a.count, 2, 1)};
  const uint64_t size[2] = {blockSize(a.count, 2, 0), blockSize(a.count, 2, 1)};
  for (uint64_t j = 0; j < numSlices(size[0], chunk); ++j) {
    // Up: fold the children's partial sums into ours (child 0 first), pass the result up.
    for (int t = 0; t < 2; ++t) {
      const uint64_t len = sliceLen(size[t], chunk, j), off = begin[t] + j * chunk;
      if (!len) continue;
      bool folded = false;
      for (int k : trees[t].child) {
        if (k < 0) continue;
        co_yield Step::recvReduce(k, folded ? outR(off, len) : inR(off, len), outR(off, len)).onChannel(t);
        folded = true;
      }
      if (trees[t].parent >= 0)
        co_yield Step::send(trees[t].parent, folded ? outR(off, len) : inR(off, len)).onChannel(t);
    }
    // Down: take the total from the parent (the root has it), pass it to the children.
    for (int t = 0; t < 2; ++t) {
      const uint64_t len = sliceLen(size[t], chunk, j), off = begin[t] + j * chunk;
      if (!len) continue;
      if (trees[t].parent >= 0) co_yield Step::recv(trees[t].parent, outR(off, len)).onChannel(t);
      for (int k : trees[t].child) {
        if (k >= 0) co_yield Step::send(k, outR(off, len)).onChannel(t);
      }
    }
  }
}

}  // namespace

TreeLinks doubleTreeNode(int n, int rank, int tree) {
  const TreeNode t = tree == 0 ? btree(n, rank) : dtree(n, rank);
  TreeLinks l;
  l.parent = t.parent;
  l.child[0] = t.child[0];
  l.child[1] = t.child[1];
  return l;
}

const AlgoInfo kTreeAllReduce = {Algo::Tree, Coll::AllReduce,        validArgs,
                                 noScratch,  checked<treeAllReduce>, 2};

}  // namespace trib::algo
