// The example plugin's own test file runs with the project's tests.
import '../../examples/plugins/least-kv.test.ts';
