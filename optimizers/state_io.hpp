// An optimizer's state as datasets and attributes of the I/O layer
// (lib/io.hpp): what tsr_optimizer_save writes alone in a file and what a
// checkpoint (lib/checkpoint.cpp) holds under a name prefix. Not installed.
#pragma once

#include <string>
#include <vector>

#include "io.hpp"
#include "tessera/optimizer.h"

namespace tsr {
namespace opt {

// Storage the blocks of state_blocks() point into, besides the optimizer's
// own buffers: keep it (and the optimizer) alive until the write.
struct StateParts {
  std::vector<int64_t> sizes;
  std::vector<double> hyper;
};

// The datasets and attributes of opt's state, every name prefixed with
// prefix ("" for a state file, "opt." in a checkpoint). Local; opt checked.
tsr_status state_blocks(tsr_optimizer opt, const std::string& prefix, StateParts* keep, std::vector<io::Block>* blocks,
                        io::Attrs* attrs);

// Restore opt from the file at path, whose datasets and attributes (from
// io::inspect) are sets and attrs, under prefix. Collective over opt's
// context; where names the state in messages ("file 'x'" or "file 'x',
// optimizer 'opt'").
tsr_status state_restore(tsr_optimizer opt, const std::string& path, const std::string& prefix,
                         const std::vector<io::DatasetInfo>& sets, const io::Attrs& attrs, const std::string& where);

}  // namespace opt
}  // namespace tsr
