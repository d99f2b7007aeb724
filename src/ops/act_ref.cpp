// Placeholder: implemented by its family's work item.
#include "ops/act_ref.hpp"
