// Runs the TypeScript worker module named by workerData.module, loaded the way bin/pgward.js loads the CLI.
import { workerData } from 'node:worker_threads';
import { register } from 'tsx/esm/api';

register();
await import(workerData.module);
