// Loads the TaskStore service definition from the .proto files shipped in
// dist/proto (copied there by scripts/copy-proto.mjs at build time). Loading
// at run time keeps the package free of generated code and of protoc.
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';

// These options decide the shape of every message the client sends and
// receives; src/wire.ts describes exactly that shape.
const LOADER_OPTIONS: protoLoader.Options = {
  keepCase: false, // camelCase field names
  longs: Number, // int64 seconds of Duration/Timestamp fit a double easily
  enums: String, // 'TASK_STATUS_WORKING' rather than 1
  defaults: true, // plain scalars always present; proto3 `optional` ones stay absent when unset
  oneofs: false,
  includeDirs: [fileURLToPath(new URL('./proto/', import.meta.url))],
};

let cached: grpc.ServiceClientConstructor | undefined;

/** The generic grpc-js client constructor of `mcp.tasks.v1.TaskStore`. */
export function taskStoreServiceClient(): grpc.ServiceClientConstructor {
  if (!cached) {
    const definition = protoLoader.loadSync('mcp/tasks/v1/task_store.proto', LOADER_OPTIONS);
    const pkg = grpc.loadPackageDefinition(definition) as unknown as {
      mcp: { tasks: { v1: { TaskStore: grpc.ServiceClientConstructor } } };
    };
    cached = pkg.mcp.tasks.v1.TaskStore;
  }
  return cached;
}

let cachedExecution: grpc.ServiceClientConstructor | undefined;

/** The generic grpc-js client constructor of `mcp.tasks.v1.TaskExecution` (the worker API). */
export function taskExecutionServiceClient(): grpc.ServiceClientConstructor {
  if (!cachedExecution) {
    const definition = protoLoader.loadSync('mcp/tasks/v1/execution.proto', LOADER_OPTIONS);
    const pkg = grpc.loadPackageDefinition(definition) as unknown as {
      mcp: { tasks: { v1: { TaskExecution: grpc.ServiceClientConstructor } } };
    };
    cachedExecution = pkg.mcp.tasks.v1.TaskExecution;
  }
  return cachedExecution;
}
