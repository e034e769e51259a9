// The gauges of one clfd (sizes, counts, uptime, version), read from the
// server's parts on every scrape.
#pragma once

#include "server/metrics/registry.h"
#include "server/service/services.h"

namespace clf::server::metrics {

// `ctx` and everything it points to must outlive the registry's last Render().
void RegisterServerGauges(Registry* registry, const ServiceContext* ctx);

}  // namespace clf::server::metrics
