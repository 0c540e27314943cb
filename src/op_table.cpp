// op_table.cpp: the op table, built once on first use from the families op_table.h lists.
#include "op_table.h"

#include <algorithm>
#include <deque>
#include <string>
#include <unordered_map>

#include "ops/attr_schema.h"

namespace oneflow {

namespace {

struct OpTable {
  std::deque<OpDef> ops;
  std::unordered_map<std::string, const OpDef*> by_name;
  OpTable() {
    struct Scope {
      OpTable* t;
      Scope(OpTable* tt) : t(tt) { current() = t; }
      ~Scope() { current() = nullptr; }
    } scope(this);
    register_core_ops();
    register_unary_ops();
    register_binary_ops();
    register_reduce_ops();
    register_linalg_ops();
    register_shape_ops();
    register_index_ops();
    register_random_ops();
    register_conv_ops();
    register_nn_ops();
    register_nn_extra_ops();
    register_rnn_ops();
    register_global_ops();
  }
  static OpTable*& current() {
    static OpTable* c = nullptr;
    return c;
  }
};

OpTable& table() {
  static OpTable* t = new OpTable();
  return *t;
}

}  // namespace

const OpDef* register_op(OpDef def) {
  OpTable* t = OpTable::current();
  if (!t) throw Error("[register_op] ops are registered only while the op table is built");
  OF_CHECK(!t->by_name.count(def.name), "[register_op] op '{}' registered twice", def.name);
  OF_CHECK(def.infer_meta != nullptr, "[register_op] op '{}' has no infer_meta", def.name);
  OF_CHECK(def.attr_types.empty() || def.attr_types.size() == def.attr_names.size(),
           "[register_op] op '{}' names {} attributes but its schema types {}", def.name,
           def.attr_names.size(), def.attr_types.size());
  for (size_t k = 0; k < def.attr_names.size(); ++k)
    for (size_t j = 0; j < k; ++j)
      OF_CHECK(def.attr_names[j] != def.attr_names[k],
               "[register_op] op '{}' names two attributes '{}'", def.name, def.attr_names[k]);
  for (uint8_t t : def.attr_types) {
    const uint8_t base = t & uint8_t(~kOptionalAttr);  // an optional field: its value's
    OF_CHECK(base > 0 && base < std::variant_size_v<AttrValue>,
             "[register_op] op '{}' has an attribute of no type", def.name);
  }
  for (const EpilogueAct& e : def.epilogue_acts) {
    OF_CHECK(e.name && *e.name && e.rows_f32 && e.tensor,
             "[register_op] op '{}' has an epilogue form without a name or its CPU loops",
             def.name);
    for (const OpDef& o : t->ops)
      for (const EpilogueAct& f : o.epilogue_acts)
        OF_CHECK(std::string_view(f.name) != e.name,
                 "[register_op] ops '{}' and '{}' both name the epilogue form '{}'", o.name,
                 def.name, e.name);
  }
  OF_CHECK(!def.epilogue_form || def.epilogue_acts.size() > 1,
           "[register_op] op '{}' picks among epilogue forms it does not have", def.name);
  if (!def.attr_order_before_v3.empty()) {
    std::vector<int> sorted = def.attr_order_before_v3;
    std::sort(sorted.begin(), sorted.end());
    bool perm = sorted.size() == def.attr_names.size();
    for (size_t k = 0; perm && k < sorted.size(); ++k) perm = sorted[k] == int(k);
    OF_CHECK(perm,
             "[register_op] op '{}': its attribute order before format 3 is not a "
             "permutation of its {} attributes",
             def.name, def.attr_names.size());
  }
  t->ops.push_back(std::move(def));
  const OpDef* p = &t->ops.back();
  t->by_name.emplace(p->name, p);
  return p;
}

const OpDef& find_op(std::string_view name) {
  auto& t = table();
  auto it = t.by_name.find(std::string(name));
  if (it == t.by_name.end()) fail("[find_op] no op named '{}'", name);
  return *it->second;
}

void set_op_cuda_kernel(std::string_view name, KernelFn fn) {
  const_cast<OpDef&>(find_op(name)).cuda = fn;  // the table owns its ops; only this slot changes
}
void set_op_cuda_16bit(std::string_view name) {
  const_cast<OpDef&>(find_op(name)).cuda_16bit = true;
}

void ensure_op_table() { table(); }

std::vector<const OpDef*> all_ops() {
  std::vector<const OpDef*> v;
  for (auto& op : table().ops) v.push_back(&op);
  return v;
}

}  // namespace oneflow
