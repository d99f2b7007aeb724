// Placeholder: implemented by its family's work item.
#include "ops/dedup_ref.hpp"
