// PendingIndex as a plain state machine: changes added as the mount queues
// them and removed as their commits are answered.
#include "fuse/pending_index.h"

#include <gtest/gtest.h>

namespace clf::fuse {
namespace {

using client::CommitOp;

CommitOp Op(CommitOp::Kind kind, Handle parent, const std::string& name, Handle h) {
  CommitOp op;
  op.kind = kind;
  op.parent = parent;
  op.name = name;
  op.handle = h;
  return op;
}

TEST(PendingIndexTest, CountsEachChangeUntilItsCommitIsAnswered) {
  PendingIndex p;
  EXPECT_TRUE(p.empty());
  const CommitOp create = Op(CommitOp::kCreate, 10, "a", 11);
  const CommitOp create2 = Op(CommitOp::kCreate, 10, "b", 12);
  p.Add(create, {10, 11});
  p.Add(create2, {10, 12});
  EXPECT_TRUE(p.Touches(10));
  EXPECT_TRUE(p.Touches(11));
  EXPECT_TRUE(p.NameQueued(10, "a"));
  EXPECT_FALSE(p.NameQueued(10, "c"));
  EXPECT_FALSE(p.NameQueued(11, "a"));  // the directory is part of the name
  p.Remove(create, {10, 11});
  EXPECT_TRUE(p.Touches(10)) << "the second create still touches the directory";
  EXPECT_FALSE(p.Touches(11));
  EXPECT_FALSE(p.NameQueued(10, "a"));
  p.Remove(create2, {10, 12});
  EXPECT_TRUE(p.empty());
  EXPECT_FALSE(p.Touches(10));
}

TEST(PendingIndexTest, SetattrsAreCountedByFile) {
  PendingIndex p;
  const CommitOp chmod = Op(CommitOp::kSetAttr, 0, "", 20);
  p.Add(chmod, {20});
  p.Add(chmod, {20});
  EXPECT_TRUE(p.AttrsQueued(20));
  EXPECT_FALSE(p.NameQueued(0, ""));  // a setattr names nothing
  p.Remove(chmod, {20});
  EXPECT_TRUE(p.AttrsQueued(20)) << "one of two setattrs is still queued";
  p.Remove(chmod, {20});
  EXPECT_FALSE(p.AttrsQueued(20));
  EXPECT_TRUE(p.empty());
}

TEST(PendingIndexTest, UnlinksOfHardLinksAreTold) {
  PendingIndex p;
  const CommitOp u1 = Op(CommitOp::kRemove, 10, "l1", 30);
  const CommitOp u2 = Op(CommitOp::kRemove, 10, "l2", 30);
  p.Add(u1, {10, 30});
  p.Add(u2, {10, 30});
  EXPECT_TRUE(p.Touches(30));
  EXPECT_TRUE(p.UnlinksQueued(30));
  EXPECT_FALSE(p.TouchesBesidesUnlinks(30)) << "only unlinks of its names are queued";
  const CommitOp chmod = Op(CommitOp::kSetAttr, 0, "", 30);
  p.Add(chmod, {30});
  EXPECT_TRUE(p.TouchesBesidesUnlinks(30));
  p.Remove(chmod, {30});
  EXPECT_FALSE(p.TouchesBesidesUnlinks(30));
  p.Remove(u1, {10, 30});
  p.Remove(u2, {10, 30});
  EXPECT_FALSE(p.UnlinksQueued(30));
  EXPECT_FALSE(p.TouchesBesidesUnlinks(30));
  EXPECT_TRUE(p.empty());
}

TEST(PendingIndexTest, AnRmdirIsNoUnlinkOfAFilesName) {
  PendingIndex p;
  CommitOp rmdir = Op(CommitOp::kRemove, 10, "d", 40);
  rmdir.directory = true;
  p.Add(rmdir, {10, 40});
  EXPECT_FALSE(p.UnlinksQueued(40));
  EXPECT_TRUE(p.TouchesBesidesUnlinks(40));
  p.Remove(rmdir, {10, 40});
  EXPECT_TRUE(p.empty());
}

TEST(PendingIndexTest, ARemoveOfWhatWasNeverAddedChangesNothing) {
  PendingIndex p;
  const CommitOp create = Op(CommitOp::kCreate, 10, "a", 11);
  p.Remove(create, {10, 11});
  EXPECT_TRUE(p.empty());
  p.Add(create, {10, 11});
  p.Remove(Op(CommitOp::kCreate, 10, "zz", 99), {99});
  EXPECT_TRUE(p.Touches(11));
  EXPECT_TRUE(p.NameQueued(10, "a"));
}

}  // namespace
}  // namespace clf::fuse
