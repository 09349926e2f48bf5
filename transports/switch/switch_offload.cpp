// The switch client's descriptor in the offload registry: what core attaches through, with the
// switch's own settings (TRIB_SWITCH, its key, slots and link kind) read here, not in core.
#include <algorithm>

#include "common/env.hpp"
#include "transports/registry.hpp"
#include "transports/switch/switch_client.hpp"

namespace trib {

namespace {

std::string configuredSwitch() { return envString("TRIB_SWITCH"); }

Status attachSwitchMember(const OffloadAttachArgs& args, std::unique_ptr<CollectiveOffload>* out,
                          std::string* detail) {
  sw::SwitchClientConfig cfg;
  cfg.address = args.address;
  // The switch is a standing service with its own key; by default the job's key.
  cfg.key = envString("TRIB_SWITCH_KEY");
  if (cfg.key.empty()) cfg.key = envString("TRIB_AUTH_KEY");
  cfg.group = args.group;
  for (auto [children, index] : args.path) cfg.path.push_back({children, index});
  cfg.leafRanks = args.leafRanks;
  cfg.slots = static_cast<uint32_t>(std::clamp<int64_t>(envInt("TRIB_SWITCH_SLOTS"), 1, 1 << 20));
  cfg.timeoutMs = static_cast<int>(args.timeout.count());
  TRIB_RETURN_IF_ERROR(
      sw::parseLinkKind(envString("TRIB_SWITCH_LINK"), &cfg.link).prefix("TRIB_SWITCH_LINK: "));
  std::unique_ptr<sw::SwitchClient> client;
  TRIB_RETURN_IF_ERROR(sw::SwitchClient::connect(cfg, &client));
  *detail = strprintf("%u slots of %llu bytes", client->quota(),
                      static_cast<unsigned long long>(client->slotBytes()));
  *out = std::move(client);
  return Status::Ok();
}

}  // namespace

OffloadDescriptor switchOffloadDescriptor() {
  OffloadDescriptor d{};
  d.name = "switch";
  d.notBuilt = nullptr;
  d.configuredAddress = configuredSwitch;
  d.attach = attachSwitchMember;
  return d;
}

}  // namespace trib
