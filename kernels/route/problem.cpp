// route's problem planning (route.hpp): the shape limits every variant shares.
// Host only.
#include <cmath>
#include <cstdint>
#include <string>

#include "common/problem_error.hpp"
#include "route/route.hpp"

namespace moekit::route {
namespace {

std::string str(std::int64_t v) { return std::to_string(v); }

}  // namespace

void validate(const Problem& p) {
  if (p.experts < 1 || p.experts > kMaxExperts)
    throw ProblemError("the number of experts must be in [1, " + str(kMaxExperts) + "], got " + str(p.experts));
  if (p.topk < 1 || p.topk > p.experts)
    throw ProblemError("--topk must be in [1, E = " + str(p.experts) + "], got " + str(p.topk));
  if (p.groups < 1 || p.experts % p.groups != 0)
    throw ProblemError("--num-groups " + str(p.groups) + " does not divide the number of experts " + str(p.experts));
  if (p.topk_groups < 1 || p.topk_groups > p.groups)
    throw ProblemError("--topk-groups must be in [1, --num-groups = " + str(p.groups) + "], got " +
                       str(p.topk_groups));
  const std::int64_t candidates = std::int64_t(p.topk_groups) * (p.experts / p.groups);
  if (p.topk > candidates)
    throw ProblemError("--topk " + str(p.topk) + " is more than the " + str(candidates) + " experts of the " +
                       str(p.topk_groups) + " kept group(s)");
  if (!std::isfinite(p.scaling)) throw ProblemError("--routed-scaling-factor must be a finite number");
  if (p.tokens < 0 || p.tokens * std::int64_t(p.topk) > std::int64_t(INT32_MAX) ||
      p.tokens * std::int64_t(p.experts) > (std::int64_t(1) << 40))
    throw ProblemError(str(p.tokens) + " tokens is too many (T*K must fit int32)");
}

}  // namespace moekit::route
