'use strict';
// Drives the independent Node.js RocketMQ client `ali-ons` against our server: route lookup through
// its name-server API, QUERY_MESSAGE and VIEW_MESSAGE_BY_ID through its remoting client, and the
// response bodies through its own message decoder. Reads a JSON job on stdin, prints a JSON report.

const crypto = require('crypto');
const ByteBuffer = require('byte');
const MQClientAPI = require('ali-ons/lib/mq_client_api');
const RemotingCommand = require('ali-ons/lib/protocol/command/remoting_command');
const MessageDecoder = require('ali-ons/lib/message/message_decoder');

const QUERY_MESSAGE = 12;
const VIEW_MESSAGE_BY_ID = 33;
const quiet = { info() {}, warn() {}, error() {}, debug() {} };

function describe(msg) {
  return {
    msgId: msg.msgId,
    topic: msg.topic,
    commitLogOffset: msg.commitLogOffset,
    storeSize: msg.storeSize,
    queueId: msg.queueId,
    queueOffset: msg.queueOffset,
    keys: msg.properties ? msg.properties.KEYS || null : null,
    uniqKey: msg.properties ? msg.properties.UNIQ_KEY || null : null,
    bodySha256: crypto.createHash('sha256').update(msg.body || Buffer.alloc(0)).digest('hex'),
  };
}

function decodeBody(body) {
  if (!body) return [];
  return MessageDecoder.decodes(ByteBuffer.wrap(body), true).map(describe);
}

async function main() {
  const chunks = [];
  for await (const chunk of process.stdin) chunks.push(chunk);
  const job = JSON.parse(Buffer.concat(chunks).toString('utf8'));
  const api = new MQClientAPI({ nameSrv: job.nameSrv, httpclient: {}, logger: quiet, responseTimeout: 5000 });
  await api.ready();
  const report = { routes: {}, queries: [], views: [] };
  let brokerAddr = null;
  for (const topic of job.topics) {
    try {
      const route = await api.getTopicRouteInfoFromNameServer(topic, 5000);
      report.routes[topic] = route;
      brokerAddr = brokerAddr || route.brokerDatas[0].brokerAddrs['0'];
    } catch (err) {
      report.routes[topic] = { error: err.name, code: err.code === undefined ? null : err.code };
    }
  }
  for (const q of job.queries) {
    const header = {
      topic: q.topic,
      key: q.key,
      maxNum: String(q.maxNum),
      beginTimestamp: String(q.begin),
      endTimestamp: String(q.end),
      _UNIQUE_KEY_QUERY: q.unique ? 'true' : 'false',
    };
    const response = await api.invoke(brokerAddr, RemotingCommand.createRequestCommand(QUERY_MESSAGE, header), 5000);
    report.queries.push({
      code: response.code,
      remark: response.remark || null,
      extFields: response.extFields,
      messages: decodeBody(response.body),
    });
  }
  for (const offset of job.views) {
    const request = RemotingCommand.createRequestCommand(VIEW_MESSAGE_BY_ID, { offset: String(offset) });
    const response = await api.invoke(brokerAddr, request, 5000);
    report.views.push({ code: response.code, remark: response.remark || null, messages: decodeBody(response.body) });
  }
  await api.close();
  process.stdout.write(JSON.stringify(report));
}

main().catch(err => {
  process.stderr.write(String(err && err.stack || err) + '\n');
  process.exit(1);
});
