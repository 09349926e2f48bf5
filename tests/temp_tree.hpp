// A test fixture that owns a fresh private folder under /tmp (mkdtemp, mode 0700; removed after each test)
// and writes files into it by relative path: the fake sysfs trees of the locality and UCX-on-rxe tests, the
// file store's folder.
#pragma once
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>

class TempTreeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/trib-tree-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(root); }

  // Writes `text` to root/rel, creating its folders.
  void write(const std::string& rel, const std::string& text) {
    std::filesystem::create_directories(std::filesystem::path(root + "/" + rel).parent_path());
    std::ofstream(root + "/" + rel) << text;
  }
  // Lists the RDMA device at root/devRel as class/infiniband/<name>, as sysfs does.
  void linkInfinibandClass(const std::string& name, const std::string& devRel) {
    std::filesystem::create_directories(root + "/class/infiniband");
    std::filesystem::create_directory_symlink("../../" + devRel, root + "/class/infiniband/" + name);
  }

  std::string root;
};
