// deploy/ as far as it can be checked without a cluster or a container
// runtime: every manifest parses and hangs together, the ConfigMap's policy
// passes `switchyard validate`, the probes hit endpoints the router serves on
// the port it listens on, and the Dockerfile runs only the package's own
// scripts and command.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { DRAIN_MS } from '../../core/serve/server.ts';
import { type Json, OPEN_TENANTS, startTestRouter, TINY_MODELS, tinyPool } from '../helpers/router.ts';

const root = new URL('../../', import.meta.url).pathname;
const dir = join(root, 'deploy/kubernetes');
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));

type Doc = Json;
const manifests = new Map<string, Doc[]>();
for (const file of readdirSync(dir)
  .filter((f) => f.endsWith('.yaml'))
  .sort()) {
  const docs = parseAllDocuments(readFileSync(join(dir, file), 'utf8'));
  manifests.set(
    file,
    docs.map((doc) => {
      assert.deepEqual(doc.errors, [], `${file} parses`);
      return doc.toJS();
    }),
  );
}
const all = [...manifests.values()].flat();
const find = (kind: string, name: string) => {
  const found = all.find((d) => d.kind === kind && d.metadata?.name === name);
  assert.ok(found, `a ${kind} named ${name}`);
  return found;
};
const deployment = find('Deployment', 'switchyard');
const pod = deployment.spec.template.spec;
const router = pod.containers[0];
const dockerfile = readFileSync(join(root, 'deploy/Dockerfile'), 'utf8');

test('every manifest parses, names its kind, and kustomization lists them all', () => {
  assert.ok(manifests.size >= 6);
  for (const [file, docs] of manifests) {
    for (const doc of docs) {
      assert.ok(typeof doc.apiVersion === 'string' && typeof doc.kind === 'string', `${file}: apiVersion and kind`);
      if (doc.kind !== 'Kustomization') assert.ok(doc.metadata?.name, `${file}: metadata.name`);
    }
  }
  const kustomization = manifests.get('kustomization.yaml')![0];
  assert.deepEqual([...kustomization.resources].sort(), [...manifests.keys()].filter((f) => f !== 'kustomization.yaml').sort());
});

test('the ConfigMap’s policy files pass switchyard validate', () => {
  const configMap = find('ConfigMap', 'switchyard-policies');
  const policyDir = mkdtempSync(join(tmpdir(), 'switchyard-deploy-'));
  try {
    for (const [name, text] of Object.entries(configMap.data as Record<string, string>)) writeFileSync(join(policyDir, name), text);
    const result = spawnSync(process.execPath, [join(root, pkg.bin.switchyard), 'validate', policyDir], { encoding: 'utf8', timeout: 120_000 });
    assert.equal(result.status, 0, `${result.stdout}\n${result.stderr}`);
    assert.match(result.stdout, /valid/);
  } finally {
    rmSync(policyDir, { recursive: true, force: true });
  }
});

test('the Deployment: 3 routers, the policy mounted as a directory where --policies points, Redis where the Service is', () => {
  assert.equal(deployment.spec.replicas, 3);
  assert.deepEqual(deployment.spec.selector.matchLabels, deployment.spec.template.metadata.labels);
  const args: string[] = router.args;
  const policies = args[args.indexOf('--policies') + 1];
  const mount = router.volumeMounts.find((m: Doc) => m.mountPath === policies);
  assert.ok(mount, `a volume mounted at ${policies}`);
  assert.equal(mount.subPath, undefined, 'a directory mount: subPath files never see ConfigMap updates');
  const volume = pod.volumes.find((v: Doc) => v.name === mount.name);
  assert.equal(volume.configMap.name, 'switchyard-policies');

  const redisUrl = new URL(router.env.find((e: Doc) => e.name === 'SWITCHYARD_REDIS_URL').value);
  const redisService = find('Service', redisUrl.hostname);
  assert.ok(redisService.spec.ports.some((p: Doc) => p.port === Number(redisUrl.port)));
  const redis = find('Deployment', 'switchyard-redis');
  assert.deepEqual(redisService.spec.selector, redis.spec.template.metadata.labels);

  const service = find('Service', 'switchyard');
  assert.deepEqual(service.spec.selector, deployment.spec.template.metadata.labels);
  assert.ok(router.ports.some((p: Doc) => p.name === service.spec.ports[0].targetPort));
  const pdb = find('PodDisruptionBudget', 'switchyard');
  assert.deepEqual(pdb.spec.selector.matchLabels, deployment.spec.template.metadata.labels);
  assert.ok(pdb.spec.maxUnavailable < deployment.spec.replicas);
  for (const kind of ['requests', 'limits']) assert.ok(router.resources[kind].memory, `memory ${kind}`);
});

test('termination grace covers the preStop pause and the router’s drain', () => {
  const preStopS = Number(router.lifecycle.preStop.exec.command[1]);
  assert.ok(pod.terminationGracePeriodSeconds >= preStopS + DRAIN_MS / 1000, `${pod.terminationGracePeriodSeconds} s ≥ ${preStopS} s + ${DRAIN_MS / 1000} s`);
});

test('the probes hit /readyz and /healthz on the port the router listens on, and the router answers them', async () => {
  const args: string[] = router.args;
  const port = Number(args[args.indexOf('--port') + 1]);
  const named = new Map(router.ports.map((p: Doc) => [p.name, p.containerPort]));
  const probes = { readinessProbe: '/readyz', livenessProbe: '/healthz' } as const;
  for (const [probe, path] of Object.entries(probes)) {
    const get = router[probe].httpGet;
    assert.equal(get.path, path);
    assert.equal(named.get(get.port) ?? get.port, port, `${probe} port`);
  }
  const t = await startTestRouter({ 'models.yaml': TINY_MODELS, 'pools.yaml': tinyPool({ replicas: 1 }), 'tenants.yaml': OPEN_TENANTS });
  try {
    for (const path of Object.values(probes)) assert.equal((await fetch(`${t.url}${path}`)).status, 200, path);
  } finally {
    await t.close();
  }
});

test('the Dockerfile runs the package’s own scripts and command, as the Deployment does', () => {
  const runs = [...dockerfile.matchAll(/^RUN (.+)$/gm)].map((m) => m[1]);
  assert.ok(runs.length > 0);
  for (const run of runs) {
    const script = /^npm run (\S+)(.*)$/.exec(run);
    if (script) assert.ok(pkg.scripts[script[1]] !== undefined || script[2].includes('--if-present'), `${run}: a package script`);
    else assert.match(run, /^npm ci\b/, `${run}: only npm ci and package scripts`);
  }
  const cmd: string[] = JSON.parse(/^CMD (\[.+\])$/m.exec(dockerfile)![1]);
  assert.deepEqual(cmd, router.args, 'the Deployment runs what the image runs');
  assert.deepEqual(cmd.slice(0, 3), ['node', pkg.bin.switchyard, 'serve']);
  const help = spawnSync(process.execPath, [join(root, pkg.bin.switchyard), 'serve', '--help'], { encoding: 'utf8', timeout: 120_000 });
  assert.equal(help.status, 0);
  for (const flag of cmd.filter((a) => a.startsWith('--'))) assert.ok(help.stdout.includes(`${flag} `), `serve takes ${flag}`);
  assert.match(dockerfile, new RegExp(`EXPOSE ${cmd[cmd.indexOf('--port') + 1]}\\b`));
});

/** Every pod template in the manifests, with where it is from. */
const podSpecs = all.filter((d) => d.spec?.template?.spec).map((d) => ({ name: `${d.kind}/${d.metadata.name}`, pod: d.spec.template.spec }));

// Pod Security Standards, "restricted" (kubernetes.io/docs/concepts/security/pod-security-standards),
// checked over the YAML: no schema or Pod Security checker installs from npm or Debian here.
test('every pod meets Pod Security "restricted"', () => {
  assert.ok(podSpecs.length >= 2);
  const allowedVolumes = new Set(['configMap', 'csi', 'downwardAPI', 'emptyDir', 'ephemeral', 'persistentVolumeClaim', 'projected', 'secret']);
  for (const { name, pod } of podSpecs) {
    for (const field of ['hostNetwork', 'hostPID', 'hostIPC']) assert.ok(!pod[field], `${name}: ${field}`);
    for (const volume of pod.volumes ?? []) {
      const types = Object.keys(volume).filter((k) => k !== 'name');
      assert.ok(
        types.every((t) => allowedVolumes.has(t)),
        `${name}: volume ${volume.name} is ${types.join(', ')}`,
      );
    }
    for (const container of [...(pod.initContainers ?? []), ...pod.containers]) {
      const where = `${name} container ${container.name}`;
      const sc = container.securityContext ?? {};
      const podSc = pod.securityContext ?? {};
      assert.notEqual(sc.privileged, true, `${where}: privileged`);
      assert.equal(sc.allowPrivilegeEscalation, false, `${where}: allowPrivilegeEscalation: false`);
      assert.ok(sc.capabilities?.drop?.includes('ALL'), `${where}: capabilities drop [ALL]`);
      assert.ok(
        (sc.capabilities?.add ?? []).every((c: string) => c === 'NET_BIND_SERVICE'),
        `${where}: only NET_BIND_SERVICE may be added`,
      );
      assert.equal(sc.runAsNonRoot ?? podSc.runAsNonRoot, true, `${where}: runAsNonRoot`);
      assert.notEqual(sc.runAsUser ?? podSc.runAsUser, 0, `${where}: runAsUser 0`);
      const seccomp = (sc.seccompProfile ?? podSc.seccompProfile)?.type;
      assert.ok(seccomp === 'RuntimeDefault' || seccomp === 'Localhost', `${where}: seccompProfile RuntimeDefault or Localhost`);
      for (const port of container.ports ?? []) assert.equal(port.hostPort, undefined, `${where}: hostPort`);
      assert.equal(sc.readOnlyRootFilesystem, true, `${where}: read-only root file system`);
    }
  }
});

test('Prometheus scrapes the admin listener as job="switchyard": the PodMonitor and the annotations name a port the router binds to the pod network', () => {
  const podMonitor = parseAllDocuments(readFileSync(join(dir, 'monitoring/podmonitor.yaml'), 'utf8'))[0].toJS();
  assert.equal(podMonitor.kind, 'PodMonitor');
  assert.deepEqual(podMonitor.spec.selector.matchLabels, deployment.spec.template.metadata.labels);
  const endpoint = podMonitor.spec.podMetricsEndpoints[0];
  assert.equal(endpoint.path, '/metrics');
  assert.ok(
    endpoint.relabelings.some((r: Doc) => r.targetLabel === 'job' && r.replacement === 'switchyard'),
    'the job the alerts expect',
  );
  const admin = router.ports.find((p: Doc) => p.name === endpoint.port);
  assert.ok(admin, `the router has a port named ${endpoint.port}`);
  const env = (name: string) => router.env.find((e: Doc) => e.name === name);
  assert.equal(String(admin.containerPort), deployment.spec.template.metadata.annotations['prometheus.io/port']);
  assert.equal(admin.containerPort, Number(env('SWITCHYARD_ADMIN_PORT')?.value ?? 8081), 'the admin listener listens there');
  assert.equal(env('SWITCHYARD_ADMIN_HOST').value, '0.0.0.0', 'reachable by Prometheus');
  // The router refuses to bind the admin listener beyond loopback without a token: the secret must be there.
  assert.notEqual(env('SWITCHYARD_ADMIN_TOKEN').valueFrom.secretKeyRef.optional, true);
  const service = find('Service', 'switchyard');
  assert.ok(
    service.spec.ports.every((p: Doc) => p.targetPort !== 'admin' && p.targetPort !== admin.containerPort),
    'the Service does not expose the admin listener',
  );
  assert.equal(deployment.spec.template.metadata.annotations['prometheus.io/path'], endpoint.path);
});

test('.dockerignore lets only what the image builds from into it', () => {
  const ignore = readFileSync(join(root, '.dockerignore'), 'utf8')
    .split('\n')
    .filter((l) => l && !l.startsWith('#'));
  assert.equal(ignore[0], '*', 'everything out first, then the sources back in');
  const allowed = ignore.filter((l) => l.startsWith('!')).map((l) => l.slice(1).replace(/\/$/, ''));
  // The build compiles these directories (scripts/build.mjs), and bin/ runs the result.
  const build = readFileSync(join(root, 'scripts/build.mjs'), 'utf8');
  const dirs = JSON.parse(/const DIRS = (\[[^\]]+\])/.exec(build)![1].replaceAll("'", '"')) as string[];
  for (const needed of [...dirs, 'bin', 'package.json', 'package-lock.json', 'scripts/build.mjs']) assert.ok(allowed.includes(needed), `${needed} is let in`);
  for (const scratch of ['test', 'docs', 'examples', 'bench', 'policies', 'dist', 'node_modules', '.git', '.test-results'])
    assert.ok(!allowed.includes(scratch), `${scratch} stays out`);
});
