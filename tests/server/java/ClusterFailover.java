import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * The official 4.9.7 producer and push consumer over a two-broker cluster while the test makes one
 * broker fail. Driven by lines on stdin, so the test decides when a broker goes down or comes back:
 *   send N PHASE   sends N messages "PHASE-i" synchronously, one JSON line per send on stdout
 *                  ({"phase","body","broker","status"} or {"phase","body","error"}), then "DONE"
 *   await PHASE SECONDS  waits until every message of PHASE sent OK was received (or SECONDS),
 *                  prints {"awaited":PHASE,"missing":[...]}
 *   finish SECONDS waits until every message sent OK was received (or SECONDS), prints one JSON
 *                  line {"missing":[...],"received":N} and exits
 * Routes are polled every second and the rebalance runs every second (system property), so the
 * clients see a broker leave and come back within the test's bounds. Judging is the test's business.
 * Args: NAMESRV_ADDR TOPIC
 */
public class ClusterFailover {
  static String quote(String s) {
    StringBuilder b = new StringBuilder("\"");
    for (char c : s.toCharArray()) {
      if (c == '"' || c == '\\') b.append('\\').append(c);
      else if (c < 0x20) b.append(String.format("\\u%04x", (int) c));
      else b.append(c);
    }
    return b.append('"').toString();
  }

  public static void main(String[] args) throws Exception {
    String ns = args[0];
    String topic = args[1];
    Set<String> received = ConcurrentHashMap.newKeySet();
    Set<String> sentOk = ConcurrentHashMap.newKeySet();
    DefaultMQPushConsumer consumer = new DefaultMQPushConsumer("failover_consumer");
    consumer.setNamesrvAddr(ns);
    consumer.setPollNameServerInterval(1000);
    consumer.setHeartbeatBrokerInterval(1000);
    consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
    consumer.subscribe(topic, "*");
    consumer.registerMessageListener(
        (MessageListenerConcurrently)
            (msgs, context) -> {
              for (MessageExt m : msgs) received.add(new String(m.getBody()));
              return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
            });
    consumer.start();
    DefaultMQProducer producer = new DefaultMQProducer("failover_producer");
    producer.setNamesrvAddr(ns);
    producer.setPollNameServerInterval(1000);
    producer.setSendMsgTimeout(3000);
    producer.setRetryTimesWhenSendFailed(2);
    producer.start();
    System.out.println("READY");
    System.out.flush();
    BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
    String line;
    while ((line = in.readLine()) != null) {
      String[] cmd = line.trim().split(" ");
      if (cmd[0].equals("send")) {
        int n = Integer.parseInt(cmd[1]);
        for (int i = 0; i < n; i++) {
          String body = cmd[2] + "-" + i;
          try {
            SendResult r = producer.send(new Message(topic, body.getBytes("UTF-8")));
            if (r.getSendStatus().name().equals("SEND_OK")) sentOk.add(body);
            System.out.println(
                "{\"phase\":" + quote(cmd[2]) + ",\"body\":" + quote(body) + ",\"broker\":"
                    + quote(r.getMessageQueue().getBrokerName()) + ",\"status\":"
                    + quote(r.getSendStatus().name()) + "}");
          } catch (Exception e) {
            System.out.println(
                "{\"phase\":" + quote(cmd[2]) + ",\"body\":" + quote(body) + ",\"error\":"
                    + quote(e.toString()) + "}");
          }
        }
        System.out.println("DONE");
        System.out.flush();
      } else if (cmd[0].equals("await")) {
        long deadline = System.currentTimeMillis() + Long.parseLong(cmd[2]) * 1000;
        String prefix = cmd[1] + "-";
        StringBuilder missing;
        while (true) {
          missing = new StringBuilder("[");
          for (String body : sentOk) {
            if (!body.startsWith(prefix) || received.contains(body)) continue;
            if (missing.length() > 1) missing.append(',');
            missing.append(quote(body));
          }
          if (missing.length() == 1 || System.currentTimeMillis() >= deadline) break;
          Thread.sleep(100);
        }
        System.out.println("{\"awaited\":" + quote(cmd[1]) + ",\"missing\":" + missing.append(']') + "}");
        System.out.flush();
      } else if (cmd[0].equals("finish")) {
        long deadline = System.currentTimeMillis() + Long.parseLong(cmd[1]) * 1000;
        while (!received.containsAll(sentOk) && System.currentTimeMillis() < deadline) Thread.sleep(100);
        StringBuilder missing = new StringBuilder("[");
        for (String body : sentOk) {
          if (received.contains(body)) continue;
          if (missing.length() > 1) missing.append(',');
          missing.append(quote(body));
        }
        System.out.println(
            "{\"missing\":" + missing.append(']') + ",\"received\":" + received.size() + "}");
        System.out.flush();
        break;
      }
    }
    producer.shutdown();
    consumer.shutdown();
    System.exit(0);
  }
}
