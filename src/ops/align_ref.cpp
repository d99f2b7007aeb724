// Placeholder: implemented by its family's work item.
#include "ops/align_ref.hpp"
