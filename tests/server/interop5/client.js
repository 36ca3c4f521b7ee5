'use strict';
// Drives the official RocketMQ 5 Node.js client (`rocketmq-client-nodejs`) against our gRPC port.
// Reads a JSON job on stdin, prints a JSON report on stdout; the client's log goes to stderr.
// job.ssl true: every client dials TLS (sslEnabled), trusting the roots grpc-js is given
// (GRPC_DEFAULT_SSL_ROOTS_FILE_PATH).
//
// job.mode "produce": a Producer sends job.messages (normal, FIFO with a message group, delayed by
//   a delivery timestamp job.delayMs ahead); the report has the start-up time and one receipt each.
// job.mode "consume": a SimpleConsumer of job.group on job.topic receives job.count messages (leased
//   job.invisibleMs), acks all but two: the first by body is left unacked (it must come back with
//   delivery attempt 2), the last has its invisible duration changed to job.extendMs (its old
//   receipt handle is then tried once, and must be refused) and is acked with its new handle once
//   the first is back; the report says what happened at each step.
// job.mode "push": a PushConsumer of job.group on job.topic (its listener answers FAILURE the first
//   time it sees job.failBody, SUCCESS otherwise) runs until job.count deliveries were seen or
//   job.withinMs ran out; the report lists every delivery, with the milliseconds since start-up.
// job.mode "dead": a SimpleConsumer of job.group on job.topic receives job.count messages (leased
//   job.invisibleMs) and acks none; job.holdMs later (the leases ran out) it receives once more;
//   the report has both receives.
// job.mode "fifo": a SimpleConsumer of the orderly job.group on job.topic receives one message,
//   then (not acking it) receives up to 16, then acks the first and receives up to 16 again; the
//   report has each receive with how long it took.
// job.mode "transact": a transactional Producer sends job.transactions on job.topic, each one
//   message in its own transaction, then commits it, rolls it back or leaves it undecided
//   (decide: null); its TransactionChecker answers COMMIT to the server's check-back and the run
//   ends job.graceMs after the first check (the EndTransaction of the check goes out after it), or
//   when job.checkWithinMs ran out; the report has the message ids and what the checker was asked.

const { ConsumeResult, Producer, PushConsumer, SimpleConsumer } = require('rocketmq-client-nodejs');
const { TransactionResolution } = require('rocketmq-client-nodejs/proto/apache/rocketmq/v2/definition_pb');

// The client's default logger writes to ~/logs; a test keeps it on stderr.
const logger = {
  info() {},
  warn: (...args) => console.error('WARN', ...args),
  error: (...args) => console.error('ERROR', ...args),
  debug() {},
  close() {},
};

function view(m) {
  return {
    body: m.body.toString('utf8'),
    messageId: m.messageId,
    topic: m.topic,
    tag: m.tag ?? null,
    keys: m.keys,
    messageGroup: m.messageGroup ?? null,
    properties: Object.fromEntries(m.properties),
    deliveryAttempt: m.deliveryAttempt ?? null,
    bornTimestamp: m.bornTimestamp ? m.bornTimestamp.getTime() : null,
  };
}

async function produce(job) {
  const started = Date.now();
  // One topic at start-up: with several, the 1.0.8 client fetches their routes one after the other
  // and opens Telemetry after the first; a server that answers the Settings before the last route
  // arrives is answered while the client is not yet waiting for them, and start-up waits forever
  // (BaseClient#startup sets its resolver only after updateRoutes). The others are fetched on send.
  const producer = new Producer({ endpoints: job.endpoints, sslEnabled: job.ssl === true, namespace: '', topic: job.topics.slice(0, 1), logger });
  await producer.startup();
  const report = { startupMs: Date.now() - started, receipts: {} };
  try {
    for (const m of job.messages) {
      const options = {
        topic: m.topic,
        body: Buffer.from(m.body),
        tag: m.tag,
        keys: m.keys,
        properties: new Map(Object.entries(m.properties || {})),
      };
      if (m.messageGroup) options.messageGroup = m.messageGroup;
      if (m.delayMs) options.deliveryTimestamp = new Date(Date.now() + m.delayMs);
      const receipt = await producer.send(options);
      report.receipts[m.name] = {
        messageId: receipt.messageId,
        offset: receipt.offset === undefined ? null : Number(receipt.offset),
        deliveryTimestamp: options.deliveryTimestamp ? options.deliveryTimestamp.getTime() : null,
      };
    }
  } finally {
    await producer.shutdown();
  }
  return report;
}

async function transact(job) {
  const asked = [];
  let checked;
  const firstCheck = new Promise((resolve) => {
    checked = resolve;
  });
  const checker = {
    async check(m) {
      asked.push({ messageId: m.messageId, topic: m.topic, body: m.body.toString('utf8') });
      checked();
      return TransactionResolution.COMMIT;
    },
  };
  const producer = new Producer({ endpoints: job.endpoints, sslEnabled: job.ssl === true, namespace: '', topic: [job.topic], checker, logger });
  await producer.startup();
  const report = { ids: {}, asked };
  try {
    for (const t of job.transactions) {
      const transaction = producer.beginTransaction();
      const receipt = await producer.send({ topic: job.topic, body: Buffer.from(t.body), keys: [t.key] }, transaction);
      report.ids[t.body] = receipt.messageId;
      if (t.decide === 'commit') await transaction.commit();
      if (t.decide === 'rollback') await transaction.rollback();
    }
    const timeout = new Promise((resolve) => setTimeout(resolve, job.checkWithinMs));
    await Promise.race([firstCheck, timeout]);
    await new Promise((resolve) => setTimeout(resolve, job.graceMs));
  } finally {
    await producer.shutdown();
  }
  return report;
}

async function receiveUntil(consumer, count, invisibleMs, deadline) {
  const got = [];
  while (got.length < count && Date.now() < deadline) {
    got.push(...(await consumer.receive(16, invisibleMs)));
  }
  return got;
}

async function consume(job) {
  const started = Date.now();
  const consumer = new SimpleConsumer({
    endpoints: job.endpoints,
    sslEnabled: job.ssl === true,
    namespace: '',
    consumerGroup: job.group,
    subscriptions: new Map([[job.topic, '*']]),
    awaitDuration: job.awaitMs,
    logger,
  });
  await consumer.startup();
  const report = { startupMs: Date.now() - started };
  try {
    const first = await receiveUntil(consumer, job.count, job.invisibleMs, Date.now() + job.receiveWithinMs);
    report.first = first.map(view);
    first.sort((a, b) => a.body.compare(b.body));
    const dropped = first[0];
    const kept = first[first.length - 1];
    for (const m of first.slice(1, -1)) await consumer.ack(m);
    const leasedAt = Date.now();
    const stale = kept.receiptHandle;
    await consumer.changeInvisibleDuration(kept, job.extendMs);
    report.newHandle = kept.receiptHandle !== stale;
    const fresh = kept.receiptHandle;
    kept.receiptHandle = stale;
    try {
      await consumer.ack(kept);
      report.staleAck = 'accepted';
    } catch (err) {
      report.staleAck = err.message;
    }
    kept.receiptHandle = fresh;
    const back = await receiveUntil(consumer, 1, job.invisibleMs, Date.now() + job.redeliverWithinMs);
    report.backAfterMs = Date.now() - leasedAt;
    report.back = back.map(view);
    for (const m of back) await consumer.ack(m);
    await consumer.ack(kept);
  } finally {
    await consumer.shutdown();
  }
  return report;
}

async function dead(job) {
  const consumer = new SimpleConsumer({
    endpoints: job.endpoints,
    sslEnabled: job.ssl === true,
    namespace: '',
    consumerGroup: job.group,
    subscriptions: new Map([[job.topic, '*']]),
    awaitDuration: job.awaitMs,
    logger,
  });
  await consumer.startup();
  const report = {};
  try {
    const first = await receiveUntil(consumer, job.count, job.invisibleMs, Date.now() + job.receiveWithinMs);
    report.first = first.map(view);
    await new Promise((resolve) => setTimeout(resolve, job.holdMs));
    const started = Date.now();
    report.after = (await consumer.receive(16, job.invisibleMs)).map(view);
    report.afterMs = Date.now() - started;
  } finally {
    await consumer.shutdown();
  }
  return report;
}

async function fifo(job) {
  const consumer = new SimpleConsumer({
    endpoints: job.endpoints,
    sslEnabled: job.ssl === true,
    namespace: '',
    consumerGroup: job.group,
    subscriptions: new Map([[job.topic, '*']]),
    awaitDuration: job.awaitMs,
    logger,
  });
  await consumer.startup();
  const report = {};
  try {
    const deadline = Date.now() + job.receiveWithinMs;
    let first = [];
    while (first.length === 0 && Date.now() < deadline) first = await consumer.receive(1, job.invisibleMs);
    report.first = first.map(view);
    let started = Date.now();
    const blocked = await consumer.receive(16, job.invisibleMs);
    report.blocked = blocked.map(view);
    report.blockedMs = Date.now() - started;
    for (const m of first) await consumer.ack(m);
    started = Date.now();
    const second = await consumer.receive(16, job.invisibleMs);
    report.secondMs = Date.now() - started;
    report.second = second.map(view);
    for (const m of [...blocked, ...second]) await consumer.ack(m);
  } finally {
    await consumer.shutdown();
  }
  return report;
}

async function push(job) {
  const started = Date.now();
  const deliveries = [];
  const consumer = new PushConsumer({
    endpoints: job.endpoints,
    sslEnabled: job.ssl === true,
    namespace: '',
    consumerGroup: job.group,
    subscriptions: new Map([[job.topic, '*']]),
    messageListener: {
      consume(m) {
        deliveries.push({ ...view(m), atMs: Date.now() - started });
        const failed = m.body.toString('utf8') === job.failBody && m.deliveryAttempt === 1;
        return failed ? ConsumeResult.FAILURE : ConsumeResult.SUCCESS;
      },
    },
    logger,
  });
  await consumer.startup();
  const report = { startupMs: Date.now() - started };
  try {
    const deadline = Date.now() + job.withinMs;
    while (deliveries.length < job.count && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    await new Promise((resolve) => setTimeout(resolve, job.graceMs));
  } finally {
    await consumer.shutdown();
  }
  report.deliveries = deliveries;
  return report;
}

async function main() {
  const chunks = [];
  for await (const chunk of process.stdin) chunks.push(chunk);
  const job = JSON.parse(Buffer.concat(chunks).toString('utf8'));
  const run = { produce, consume, dead, fifo, push, transact }[job.mode];
  process.stdout.write(JSON.stringify(await run(job)));
}

main().then(
  () => process.exit(0),
  (err) => {
    console.error(err && err.stack ? err.stack : err);
    process.exit(1);
  },
);
