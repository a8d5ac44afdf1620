// Checks custom resources (a JSON array on stdin) against the schemas
// their projects publish, as packaged by kubernetes-models. Prints one line
// per problem; exits 1 when there is any.
"use strict";

const { ScaledObject } = require("@kubernetes-models/keda/keda.sh/v1alpha1/ScaledObject");
const { TriggerAuthentication } = require("@kubernetes-models/keda/keda.sh/v1alpha1/TriggerAuthentication");
const { ServiceMonitor } = require("@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/ServiceMonitor");
const { PodMonitor } = require("@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/PodMonitor");
const { PrometheusRule } = require("@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/PrometheusRule");

const MODELS = {
  "keda.sh/v1alpha1/ScaledObject": ScaledObject,
  "keda.sh/v1alpha1/TriggerAuthentication": TriggerAuthentication,
  "monitoring.coreos.com/v1/ServiceMonitor": ServiceMonitor,
  "monitoring.coreos.com/v1/PodMonitor": PodMonitor,
  "monitoring.coreos.com/v1/PrometheusRule": PrometheusRule,
};

const docs = JSON.parse(require("fs").readFileSync(0, "utf8"));
let problems = 0;
for (const doc of docs) {
  const where = `${doc.kind}/${doc.metadata && doc.metadata.name}`;
  const Model = MODELS[`${doc.apiVersion}/${doc.kind}`];
  if (!Model) {
    console.log(`${where}: no schema known for ${doc.apiVersion} ${doc.kind}`);
    problems += 1;
    continue;
  }
  try {
    new Model(doc).validate();
  } catch (err) {
    console.log(`${where}: ${err.message}`);
    problems += 1;
  }
}
process.exit(problems > 0 ? 1 : 0);
