// Placeholder: implemented by the npy work item.
#include "npy.hpp"
